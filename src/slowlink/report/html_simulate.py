"""The HTML page of ``slowlink simulate``: per-traffic slowdowns, a timeline and a link-utilisation heatmap.

Draws the :class:`~slowlink.sim.scenario.ScenarioResult` the command computed; the page scaffolding
(inline CSS and SVG, escaping) is :mod:`slowlink.report.page`'s.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from slowlink import units
from slowlink.report.page import figure_block, figure_svg, html_page, html_table, inputs_block, new_figure, write_page
from slowlink.report.simulate import slowdown

if TYPE_CHECKING:
    from slowlink.sim.scenario import ScenarioResult, TrafficResult
    from slowlink.spec.cluster import Cluster

HEATMAP_LINKS = 30  # the busiest links drawn; more rows are unreadable at page width


def slowdown_svg(traffic: Sequence[TrafficResult]) -> str:
    """Left: each traffic's slowdown against running alone. Right: start-finish bars with the alone time."""
    names = [t.name for t in traffic]
    salt = "sim-slowdown"
    with new_figure(salt, 11, 1.4 + 0.45 * len(names), ncols=2) as (fig, (ax1, ax2)):
        slow = [slowdown(t) for t in traffic]
        ax1.barh(range(len(names)), slow, color=["#c44e52" if s > 1.05 else "#4c72b0" for s in slow], height=0.6)
        ax1.axvline(1.0, color="#999", ls="--", lw=1)
        for i, s in enumerate(slow):
            ax1.text(s, i, f" {s:.2f}x", va="center", fontsize=9)
        ax1.set_xlim(0, max(slow) * 1.25)
        ax1.set_xlabel("slowdown (time shared / time alone)")
        ax1.set_title("per-traffic slowdown")
        for i, t in enumerate(traffic):
            ax2.barh(i, t.duration_s / units.MS, left=t.start_s / units.MS, color="#dd8452", height=0.6,
                     label="with the others" if i == 0 else None)
            ax2.barh(i, t.alone_s / units.MS, left=t.start_s / units.MS, color="#4c72b0", height=0.25,
                     label="alone" if i == 0 else None)
        ax2.set_xlabel("time (ms)")
        ax2.set_title("timeline")
        ax2.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        for ax in (ax1, ax2):
            ax.set_yticks(range(len(names)), names)
            ax.invert_yaxis()
            ax.spines[["top", "right"]].set_visible(False)
        return figure_svg(fig, salt)


def heatmap_svg(r: ScenarioResult, top: int = HEATMAP_LINKS) -> str | None:
    """Utilisation of the busiest links over time on a log time axis; None when the run kept no timeline.

    The log axis shows the short early phases (latency, small flows) next to the long tail; its first
    boundary (t = 0) is drawn at half the first positive boundary, the earliest time a log axis can show.
    """
    rates = r.sim.link_rate_bytes_s
    if rates is None or r.sim.segments_s.size < 2:
        return None
    util = rates / r.sim.link_capacity_bytes_s
    order = [int(i) for i in np.argsort(-r.sim.busy_utilisation(), kind="stable")[:top] if r.sim.link_bytes[i] > 0]
    t_ms = np.asarray(r.sim.segments_s, dtype=float) / units.MS
    positive = t_ms[t_ms > 0]
    if not order or positive.size == 0:
        return None
    t_ms = np.where(t_ms > 0, t_ms, positive.min() / 2)
    salt = "sim-heatmap"
    with new_figure(salt, 11, 1.5 + 0.2 * len(order)) as (fig, (ax,)):
        mesh = ax.pcolormesh(t_ms, np.arange(len(order) + 1), util[:, order].T, vmin=0, vmax=1, cmap="viridis")
        ax.set_xscale("log")
        ax.set_yticks(np.arange(len(order)) + 0.5, [r.link_names[i] for i in order], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("time (ms, log scale)")
        fig.colorbar(mesh, ax=ax, label="load / capacity", pad=0.01)
        return figure_svg(fig, salt)


def summary_sentence(r: ScenarioResult) -> str:
    """The most slowed traffic and the busiest link, in words."""
    worst = max(r.traffic, key=slowdown)
    util = r.sim.busy_utilisation()
    hot = int(np.argmax(util))
    return (f"{worst.name} takes {worst.duration_s / units.MS:.3f} ms, {slowdown(worst):.2f}x its "
            f"{worst.alone_s / units.MS:.3f} ms alone; busiest link {r.link_names[hot]}: "
            f"{util[hot]:.0%} mean, {r.sim.peak_utilisation[hot]:.0%} peak utilisation")


def simulate_page(r: ScenarioResult, cluster: Cluster) -> str:
    """Summary sentence, slowdowns and timeline, the heatmap, the traffic table and the cluster."""
    fig = figure_block(slowdown_svg(r.traffic), "Each traffic's time with the others against its time alone "
                        "on the same fabric.", "slowdown")
    heat = heatmap_svg(r)
    heat_block = (figure_block(heat, f"Utilisation of the {HEATMAP_LINKS} busiest links over time.", "heatmap")
                  if heat is not None else "<p>No utilisation timeline: the run was too large to keep one.</p>")
    rows = [(t.name, t.kind, t.algorithm, f"{t.start_s / units.MS:.3f}", f"{t.finish_s / units.MS:.3f}",
             f"{t.alone_s / units.MS:.3f}", f"{slowdown(t):.2f}x", f"{t.bytes / units.GB:.2f}") for t in r.traffic]
    table = html_table(("traffic", "kind", "algorithm", "start ms", "finish ms", "alone ms", "slowdown", "GB moved"),
                   rows)
    body = (f'<h2>Bottleneck</h2><div class="bottleneck"><span class="sentence">'
            f"{html.escape(summary_sentence(r))}</span></div><h2>Traffic</h2>{fig}{table}"
            f"<h2>Link utilisation</h2>{heat_block}{inputs_block([cluster], None)}")
    return html_page(f"slowlink simulate: {r.name} ({r.sim.makespan_s / units.MS:.3f} ms)", body)


def write_simulate(path: Path, r: ScenarioResult, cluster: Cluster) -> None:
    write_page(path, simulate_page(r, cluster))
