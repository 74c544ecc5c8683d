"""CLI of the shared-cluster simulation: `slowlink share SCENARIO.yaml [--json] [--plot out.png]`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from slowlink.cli.common import clean_errors, out, print_json


def check_plot(path: Path) -> None:
    """--plot's file can be written (folder, suffix) and matplotlib is installed: checked before the run."""
    from slowlink.report.figure import check_figure_output

    check_figure_output(path, "--plot")


@clean_errors
def share_cmd(
    scenario: Annotated[Path, typer.Argument(help="Share scenario YAML/JSON file (cluster, policies, jobs).")],
    as_json: Annotated[bool, typer.Option("--json", help="JSON on stdout.")] = False,
    plot: Annotated[Path | None, typer.Option(
        "--plot", help="Write allocation, utilisation and waiting jobs over time (.png, .svg or .pdf).")] = None,
    html: Annotated[Path | None, typer.Option(
        "--html", help="Also write a self-contained HTML report with figures to this file.")] = None,
) -> None:
    """Simulate a shared GPU cluster under each policy: utilisation, fragmentation, queueing, deadlocks."""
    from slowlink.report.html import check_html_path
    from slowlink.report.share import share_tables, write_timeline
    from slowlink.share.scenario import load_share
    from slowlink.share.sim import simulate_share

    if plot is not None:
        check_plot(plot)
    check_html_path(html)
    spec, jobs, shape = load_share(scenario)
    result = simulate_share(spec, jobs, shape, timeline=plot is not None or html is not None)
    if plot is not None:
        write_timeline(result, plot)
    if html is not None:
        from slowlink.report.html_share import write_share

        write_share(html, result, spec, jobs)
    if as_json:
        print_json(result.to_json())
        return
    for item in share_tables(result):
        out.print(item)


def register(app: typer.Typer, validate_app: typer.Typer) -> None:
    """Add this area's subcommands to the root app."""
    app.command("share")(share_cmd)
