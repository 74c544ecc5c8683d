"""``slowlink simulate SCENARIO.yaml``: several traffics on one fabric, flow-level, with link utilisation."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from slowlink.cli.common import clean_errors, out, print_json


def check_heatmap(path: Path) -> None:
    """--heatmap's file can be written (folder, suffix) and matplotlib is installed: checked before work."""
    from slowlink.report.figure import check_figure_output

    check_figure_output(path, "--heatmap")


@clean_errors
def simulate(
    scenario: Annotated[Path, typer.Argument(help="Scenario YAML/JSON file (cluster + traffic list).")],
    as_json: Annotated[bool, typer.Option("--json", help="JSON on stdout.")] = False,
    heatmap_png: Annotated[Path | None, typer.Option(
        "--heatmap", help="Write a link-utilisation image (.png, .svg or .pdf).")]
    = None,
    html: Annotated[Path | None, typer.Option("--html", help="Also write an HTML report (slowdowns, timeline, "
                                               "utilisation heatmap) to this file.")] = None,
) -> None:
    """Run several traffics (collectives, checkpoint bursts) at once on the cluster's fabric."""
    from slowlink.progress import status
    from slowlink.report import html as report_html
    from slowlink.report.simulate import hottest_table, to_json, traffic_table, write_heatmap
    from slowlink.sim.scenario import load_scenario, run_scenario

    report_html.check_html_path(html)
    if heatmap_png is not None:  # before the simulation, which can take minutes
        check_heatmap(heatmap_png)
    spec, cluster = load_scenario(scenario)
    with status(f"simulate: {len(spec.traffic)} traffics"):
        result = run_scenario(spec, cluster)
    if html is not None:
        from slowlink.report.html_simulate import write_simulate

        write_simulate(html, result, cluster)
    if heatmap_png is not None:
        write_heatmap(result, heatmap_png)
    if as_json:
        print_json(to_json(result))
        return
    out.print(traffic_table(result))
    out.print(hottest_table(result))


def register(app: typer.Typer, validate_app: typer.Typer) -> None:
    """Add this area's subcommands to the root app and to `slowlink validate`."""
    app.command("simulate")(simulate)
