"""Rendering of the shared-cluster simulation: one row per policy, slowdowns by kind, deadlocks named."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table

from slowlink import units
from slowlink.report.figure import require_matplotlib

if TYPE_CHECKING:
    from slowlink.share.result import ShareResult


def _f(value: float, fmt: str = "{:.1f}") -> str:
    return "-" if math.isnan(value) else fmt.format(value)


POLICY_HEADER = ("policy", "finished", "utilisation", "allocated", "fragmentation", "held idle", "mean queue (s)",
                 "p95 queue (s)", "p95 JCT (s)", "deadlocks")
SLOWDOWN_HEADER = ("policy", "kind", "finished", "run slowdown", "JCT slowdown", "mean queue (s)")


def policy_rows(result: ShareResult) -> list[tuple[str, ...]]:
    """One row of :data:`POLICY_HEADER` per policy."""
    return [(p.name, f"{p.finished}/{p.jobs}", f"{p.utilisation:.1%}", f"{p.allocated:.1%}", f"{p.fragmentation:.1%}",
             f"{p.held_idle:.1%}", _f(p.mean_queue_s), _f(p.p95_queue_s), _f(p.p95_jct_s), str(len(p.deadlocks)))
            for p in result.policies]


def slowdown_rows(result: ShareResult) -> list[tuple[str, ...]]:
    """One row of :data:`SLOWDOWN_HEADER` per policy and job kind."""
    return [(p.name, k.kind, f"{k.finished}/{k.jobs}", _f(k.run_slowdown, "{:.2f}x"), _f(k.jct_slowdown, "{:.2f}x"),
             _f(k.mean_queue_s)) for p in result.policies for k in p.by_kind]


def policy_table(result: ShareResult) -> Table:
    """Utilisation, allocation, fragmentation and queueing of every policy."""
    table = Table(title=f"{result.name}: {result.jobs} jobs on {result.gpus} GPUs")
    for col in POLICY_HEADER:
        table.add_column(col, justify="right")
    for row in policy_rows(result):
        table.add_row(*row)
    return table


def slowdown_table(result: ShareResult) -> Table:
    """Run slowdown (sharing) and JCT slowdown (with the wait) of each kind under each policy."""
    table = Table(title="slowdown by kind: run (finish - start) / alone, JCT (finish - arrival) / alone")
    for col in SLOWDOWN_HEADER:
        table.add_column(col, justify="left" if col == "policy" else "right")
    for row in slowdown_rows(result):
        table.add_row(*row)
    return table


def deadlock_lines(result: ShareResult) -> list[str]:
    """Each deadlock in words."""
    return [f"deadlock under {p.name} at t={d.time_s:.1f} s: {d.describe()}" for p in result.policies
            for d in p.deadlocks]


def share_tables(result: ShareResult) -> list[Table | str]:
    """Everything `slowlink share` prints: the policy table, slowdowns, then each deadlock in words."""
    return [policy_table(result), slowdown_table(result), *deadlock_lines(result)]


PLOT_POINTS = 20_000  # most steps drawn per policy; longer timelines are thinned evenly


def draw_timeline(top: Any, bottom: Any, result: ShareResult, points: int = PLOT_POINTS) -> None:
    """Allocated share and utilisation (top) and waiting jobs (bottom) over time, one colour per policy, each
    thinned evenly to about ``points`` steps."""
    for p in result.policies:
        line = p.timeline[:: max(1, len(p.timeline) // points)]
        t = [x[0] / units.HOUR for x in line]
        (drawn,) = top.step(t, [x[1] for x in line], where="post", label=f"{p.name} allocated")
        top.step(t, [x[2] for x in line], where="post", linestyle=":", color=drawn.get_color(),
                 label=f"{p.name} utilisation")
        bottom.step(t, [x[3] for x in line], where="post", label=p.name)
    top.set_ylabel("share of GPUs")
    top.set_ylim(0, 1.05)
    bottom.set_ylabel("waiting jobs")
    bottom.set_xlabel("time (h)")


def write_timeline(result: ShareResult, path: Path) -> None:
    """:func:`draw_timeline` to a .png, .svg or .pdf file (needs the 'plot' extra)."""
    require_matplotlib("--plot").use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    draw_timeline(top, bottom, result)
    top.legend(fontsize=7)
    top.set_title(f"{result.name}: {result.jobs} jobs on {result.gpus} GPUs")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
