"""Rendering of ``slowlink simulate`` results: JSON, the traffic and hottest-link tables, the heatmap image."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from rich.table import Table

from slowlink import units
from slowlink.errors import SlowlinkError
from slowlink.report.figure import require_matplotlib

if TYPE_CHECKING:
    from slowlink.sim.scenario import ScenarioResult, TrafficResult

HEATMAP_TOP = 40  # links drawn in the heatmap image, busiest first


def slowdown(t: TrafficResult) -> float:
    """Time with the other traffics / time alone on the same fabric (1.0 when it ran alone in no time)."""
    return t.duration_s / t.alone_s if t.alone_s > 0 else 1.0


def to_json(r: ScenarioResult) -> dict[str, Any]:
    """Traffic times, the time breakdown, hottest links and per-link utilisation (every loaded link)."""
    from slowlink.sim.scenario import hottest, link_loads

    return {
        "name": r.name,
        "makespan_s": r.sim.makespan_s,
        "traffic": [{"name": t.name, "kind": t.kind, "algorithm": t.algorithm, "start_s": t.start_s,
                     "finish_s": t.finish_s, "duration_s": t.duration_s, "alone_s": t.alone_s,
                     "slowdown": slowdown(t), "contention_s": t.duration_s - t.alone_s, "bytes": t.bytes}
                    for t in r.traffic],
        "hottest_links": [h.to_json() for h in hottest(r)],
        "links": {x.link: {k: v for k, v in x.to_json().items() if k != "link"} for x in link_loads(r)},
    }


def traffic_table(r: ScenarioResult) -> Table:
    """One row per traffic: when it ran, how long it would take alone, its slowdown and bytes."""
    tab = Table(title=f"{r.name}: {r.sim.makespan_s * 1e3:.3f} ms")
    for col in ("traffic", "kind", "algorithm", "start ms", "finish ms", "alone ms", "slowdown", "GB moved"):
        tab.add_column(col, justify="left" if col in ("traffic", "kind", "algorithm") else "right")
    for t in r.traffic:
        tab.add_row(t.name, t.kind, t.algorithm, f"{t.start_s * 1e3:.3f}", f"{t.finish_s * 1e3:.3f}",
                    f"{t.alone_s * 1e3:.3f}", f"{slowdown(t):.2f}x", f"{t.bytes / units.GB:.2f}")
    return tab


def hottest_table(r: ScenarioResult) -> Table:
    """The links with the highest mean utilisation over the run, with their peak and bytes."""
    from slowlink.sim.scenario import hottest

    hot = Table(title="hottest links")
    for col in ("link", "mean util", "peak util", "GB"):
        hot.add_column(col, justify="left" if col == "link" else "right")
    for h in hottest(r):
        hot.add_row(h.link, f"{h.mean_utilisation:.0%}", f"{h.peak_utilisation:.0%}", f"{h.bytes / units.GB:.2f}")
    return hot


def write_heatmap(r: ScenarioResult, path: Path, top: int = HEATMAP_TOP) -> None:
    """Utilisation of the ``top`` busiest links over time as an image (needs the 'plot' extra)."""
    require_matplotlib("--heatmap").use("Agg")
    import matplotlib.pyplot as plt

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
