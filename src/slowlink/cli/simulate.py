"""``slowlink simulate SCENARIO.yaml``: several traffics on one fabric, flow-level, with link utilisation."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from slowlink import units
from slowlink.cli.common import clean_errors, print_json
from slowlink.errors import SlowlinkError
from slowlink.sim.scenario import ScenarioResult, hottest, load_scenario, run_scenario

out = Console(highlight=False, width=140)


def to_json(r: ScenarioResult) -> dict[str, Any]:
    """Traffic times, the time breakdown, hottest links and per-link utilisation (every loaded link)."""
    util = r.sim.busy_utilisation()
    return {
        "name": r.name,
        "makespan_s": r.sim.makespan_s,
        "traffic": [{"name": t.name, "kind": t.kind, "algorithm": t.algorithm, "start_s": t.start_s,
                     "finish_s": t.finish_s, "duration_s": t.duration_s, "alone_s": t.alone_s,
                     "slowdown": t.duration_s / t.alone_s if t.alone_s > 0 else 1.0,
                     "contention_s": t.duration_s - t.alone_s, "bytes": t.bytes} for t in r.traffic],
        "hottest_links": hottest(r),
        "links": {r.link_names[i]: {"mean_utilisation": float(util[i]),
                                    "peak_utilisation": float(r.sim.peak_utilisation[i]),
                                    "bytes": float(r.sim.link_bytes[i])}
                  for i in np.flatnonzero(r.sim.link_bytes > 0)},
    }


HEATMAP_SUFFIXES = (".png", ".svg", ".pdf")  # formats matplotlib's Agg/vector backends write


def check_heatmap(path: Path) -> None:
    """--heatmap's file can be written (folder, suffix) and matplotlib is installed: checked before work."""
    from slowlink.fileio import check_output

    check_output(path, "--heatmap", HEATMAP_SUFFIXES)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise SlowlinkError("--heatmap needs matplotlib, slowlink's 'plot' extra: pip install matplotlib") from None


def heatmap(r: ScenarioResult, path: Path, top: int = 40) -> None:
    """Utilisation of the ``top`` busiest links over time as an image (needs the 'plot' extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SlowlinkError("--heatmap needs matplotlib, slowlink's 'plot' extra: pip install matplotlib") from None
    rates = r.sim.link_rate_bytes_s
    if rates is None:
        raise SlowlinkError("--heatmap: the run is too large to keep a utilisation timeline "
                            "(segments x links > 2,000,000); shrink the scenario")
    util = rates / r.sim.link_capacity_bytes_s
    order = np.argsort(-r.sim.busy_utilisation(), kind="stable")[:top]
    t = r.sim.segments_s * 1e3
    fig, ax = plt.subplots(figsize=(10, 0.22 * len(order) + 1.5))
    mesh = ax.pcolormesh(t, np.arange(len(order) + 1), util[:, order].T, vmin=0, vmax=1, cmap="viridis")
    ax.set_yticks(np.arange(len(order)) + 0.5, [r.link_names[i] for i in order], fontsize=6)
    ax.set_xlabel("time (ms)")
    ax.set_title(f"{r.name}: link utilisation")
    fig.colorbar(mesh, ax=ax, label="load / capacity")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _table(r: ScenarioResult) -> Table:
    tab = Table(title=f"{r.name}: {r.sim.makespan_s * 1e3:.3f} ms")
    for col in ("traffic", "kind", "algorithm", "start ms", "finish ms", "alone ms", "slowdown", "GB moved"):
        tab.add_column(col, justify="left" if col in ("traffic", "kind", "algorithm") else "right")
    for t in r.traffic:
        slow = t.duration_s / t.alone_s if t.alone_s > 0 else 1.0
        tab.add_row(t.name, t.kind, t.algorithm, f"{t.start_s * 1e3:.3f}", f"{t.finish_s * 1e3:.3f}",
                    f"{t.alone_s * 1e3:.3f}", f"{slow:.2f}x", f"{t.bytes / units.GB:.2f}")
    return tab


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
    from slowlink.report import html as report_html

    report_html.check_html_path(html)
    if heatmap_png is not None:  # before the simulation, which can take minutes
        check_heatmap(heatmap_png)
    spec, cluster = load_scenario(scenario)
    result = run_scenario(spec, cluster)
    if html is not None:
        from slowlink.report.html_simulate import write_simulate

        write_simulate(html, result, cluster)
    if heatmap_png is not None:
        heatmap(result, heatmap_png)
    if as_json:
        print_json(to_json(result))
        return
    out.print(_table(result))
    hot = Table(title="hottest links")
    for col in ("link", "mean util", "peak util", "GB"):
        hot.add_column(col, justify="left" if col == "link" else "right")
    for h in hottest(result):
        hot.add_row(h["link"], f"{h['mean_utilisation']:.0%}", f"{h['peak_utilisation']:.0%}",
                    f"{h['bytes'] / units.GB:.2f}")
    out.print(hot)


def register(app: typer.Typer, validate_app: typer.Typer) -> None:
    """Add this area's subcommands to the root app and to `slowlink validate`."""
    app.command("simulate")(simulate)
