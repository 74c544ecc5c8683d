"""Rendering of a design search: the Pareto front, the cheapest design, what each constraint costs and which
rule removed how many configurations; as tables, JSON, a CSV/Parquet of every point, and a plot."""

from __future__ import annotations

import math
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table

from slowlink.cost.model import BEFORE_FAILURES
from slowlink.search.space import sync_mapping

if TYPE_CHECKING:
    from slowlink.search.evaluate import Point
    from slowlink.search.run import SearchResult
    from slowlink.search.space import Space
    from slowlink.spec.workload import Sync


def point_json(space: Space, p: Point) -> dict[str, Any]:
    """A point with its design and layout spelled out (NaN fields, unknown for removed points, as None)."""
    n = len(space.layouts)
    d = space.hardware[p.index // n]
    layout = space.layout(p.index % n)
    lay = asdict(layout)
    design = asdict(d)
    if not space.across_sites:  # a space without sites: the keys it always had
        design = {k: v for k, v in design.items() if k not in ("sites", "dci_links")}
    if layout.sync is None:
        del lay["sync"]
    else:
        lay["sync"] = sync_mapping(layout.sync)
    out: dict[str, Any] = {"index": p.index, "design": d.label(), **design, **lay}
    for key, value in asdict(p).items():
        out[key] = None if isinstance(value, float) and math.isnan(value) else value
    return out


def search_json(r: SearchResult) -> dict[str, Any]:
    """The `slowlink search --json` contract: evaluated, feasible, pareto, best, removed_by_rule (+ more)."""
    return {"name": r.space.name, "evaluated": len(r.points), "feasible": len(r.feasible),
            "tokens": r.space.tokens, "pareto": [point_json(r.space, p) for p in r.front],
            "best": None if r.best is None else point_json(r.space, r.best),
            "fastest": None if r.fastest is None else point_json(r.space, r.fastest),
            "removed_by_rule": r.removed_by_rule, "constraint_cost": r.constraint_cost,
            "basis": basis(r)}


def basis(r: SearchResult) -> str:
    """How the feasible designs were priced: with the data stall and after failures where their checkpoint could
    be priced (the space's storage:, or reliability: checkpoint_s and restore_s), else before failures."""
    priced = {p.failures_priced for p in r.feasible}
    if priced == {True}:
        return "step-model throughput with its data stall x ETTR (failure model)"
    if priced == {False}:
        return (f"step-model throughput with its data stall, {BEFORE_FAILURES} (ETTR 1): the space has no "
                "storage: section")
    return "step-model throughput with its data stall; x ETTR where a design's failures could be priced, else 1"


def front_table(r: SearchResult) -> Table:
    """The Pareto front of run cost vs time-to-train, each point with its bottleneck (why it wins)."""
    table = Table(title=f"{r.space.name}: Pareto front, run cost vs time to train {r.space.tokens:.3g} tokens "
                        f"({'after failures' if all(p.failures_priced for p in r.front) else BEFORE_FAILURES})")
    for col in ("design", "tp/pp/vp/mb/zero", "days", "run MUSD", "USD/M tok", "capex MUSD", "net share",
                "bottleneck"):
        table.add_column(col, justify="left" if col in ("design", "bottleneck") else "right")
    n = len(r.space.layouts)
    for p in r.front:
        lay = r.space.layout(p.index % n)
        mark = " *" if p is r.best else ""
        sync = "" if lay.sync is None else f" {sync_label(lay.sync)}"
        table.add_row(r.space.hardware[p.index // n].label() + mark,
                      f"{lay.tp}/{lay.pp}/{lay.vp}/{lay.micro_batch}/{lay.zero}{sync}",
                      f"{p.days:.1f}", f"{p.run_usd / 1e6:.2f}", f"{p.usd_per_million_tokens:.3f}",
                      f"{p.capex_usd / 1e6:.1f}", f"{p.network_share:.1%}", p.bottleneck)
    return table


def sync_label(sync: Sync) -> str:
    """A sync option in a few words: ``ddp``, ``diloco H=100 int8``, ``streaming-diloco H=100 fp4 F=10``."""
    if sync.crosses == "pp":
        return "pp across sites"
    if sync.method in ("ddp", "hierarchical"):
        return sync.method
    frag = f" F={sync.fragments}" if sync.method == "streaming-diloco" else ""
    return f"{sync.method} H={sync.inner_steps} {sync.outer_dtype}{frag}"


def summary_lines(r: SearchResult) -> list[str]:
    """Counts, the cheapest design, what each constraint costs, and the rules that removed points."""
    lines = [f"evaluated {len(r.points):,} configurations, {len(r.feasible):,} feasible"]
    if r.best is not None:
        p = point_json(r.space, r.best)
        sync = r.space.layout(r.best.index % len(r.space.layouts)).sync
        how = "" if sync is None else f", {sync_label(sync)}"
        lines.append(f"cheapest per token (*): {p['design']}, tp {p['tp']} pp {p['pp']} vp {p['vp']}{how}: "
                     f"{r.best.usd_per_million_tokens:.3f} USD/M tokens, {r.best.days:.1f} days, "
                     f"{r.best.run_usd / 1e6:.2f} MUSD for the run")
    if r.fastest is not None:
        f = point_json(r.space, r.fastest)
        lines.append(f"fastest within the constraints: {f['design']}, tp {f['tp']} pp {f['pp']}: "
                     f"{r.fastest.days:.1f} days, {r.fastest.run_usd / 1e6:.2f} MUSD")
    for name, c in r.constraint_cost.items():
        without, with_ = c["usd_per_million_tokens_without"], c["usd_per_million_tokens_with"]
        if without is not None and with_ is not None:
            lines.append(f"constraint {name}: costs {with_ - without:+.4f} USD/M tokens "
                         f"({without:.3f} without it)")
    lines += [f"removed by {rule}: {count:,}" for rule, count in r.removed_by_rule.items()]
    return lines


def empty_message(r: SearchResult) -> str:
    """Why no design is left: each rule and how many configurations it removed."""
    rules = ", ".join(f"{rule} removed {count:,}" for rule, count in r.removed_by_rule.items())
    return f"search {r.space.name}: none of the {len(r.points):,} configurations is feasible: {rules}"


def write_points(r: SearchResult, path: Path) -> None:
    """Every point as CSV or Parquet (by suffix)."""
    import pandas as pd

    n = len(r.space.layouts)
    rows = []
    for p in r.points:
        row = point_json(r.space, p)
        if "sync" in row:  # a column of values, not of mappings: the option in words (its keys are in --json)
            sync = r.space.layout(p.index % n).sync
            row["sync"] = "" if sync is None else sync_label(sync)
        rows.append(row)
    frame = pd.DataFrame(rows)
    if path.suffix.lower() == ".parquet":
        frame.to_parquet(path, index=False)
    else:
        frame.to_csv(path, index=False)


def bottleneck_kind(p: Point) -> str:
    """The bottleneck sentence's head (``TP activation collectives over scale-up nvlink4``, ``pipeline bubble``)."""
    return p.bottleneck.split(":", 1)[0] or "unknown"


def _label_groups(front: list[Point], rel: float = 0.015) -> list[tuple[int, int, Point]]:
    """Runs of front points (numbered from 1) that sit within ``rel`` of the run's first point on both axes,
    so that near-identical designs (InfiniBand vs RoCE of one size) share one label, ``3-4``."""
    groups: list[tuple[int, int, Point]] = []
    for i, p in enumerate(front, 1):
        if groups:
            first, _, q = groups[-1]
            if abs(p.days - q.days) <= rel * q.days and abs(p.run_usd - q.run_usd) <= rel * q.run_usd:
                groups[-1] = (first, i, q)
                continue
        groups.append((i, i, p))
    return groups


def draw_front(ax: Any, r: SearchResult) -> None:
    """Run cost vs days on ``ax``: every feasible point in grey, the front numbered (1 = fastest) and coloured
    by its bottleneck, the cheapest per token and the fastest design ringed. Log days when they span > 10x."""
    ax.scatter([p.days for p in r.feasible], [p.run_usd / 1e6 for p in r.feasible], s=8, color="#bbbbbb",
               alpha=0.5, label="feasible designs", zorder=1)
    ax.plot([p.days for p in r.front], [p.run_usd / 1e6 for p in r.front], "-", color="#888888", lw=1, zorder=2)
    kinds = list(dict.fromkeys(bottleneck_kind(p) for p in r.front))
    for k, kind in enumerate(kinds):
        pts = [p for p in r.front if bottleneck_kind(p) == kind]
        ax.scatter([p.days for p in pts], [p.run_usd / 1e6 for p in pts], s=40, color=f"C{k % 10}", zorder=3,
                   label=f"front, bottleneck: {kind}")
    for first, last, p in _label_groups(r.front):
        ax.annotate(str(first) if first == last else f"{first}-{last}", (p.days, p.run_usd / 1e6),
                    textcoords="offset points", xytext=(5, 4), fontsize=8)
    for q, name, marker in ((r.best, "cheapest per token", "*"), (r.fastest, "fastest", "D")):
        if q is not None:
            ax.scatter([q.days], [q.run_usd / 1e6], s=260 if marker == "*" else 130, marker=marker,
                       facecolors="none", edgecolors="black", linewidths=1.4, zorder=4, label=name)
    days = [p.days for p in r.feasible]
    if days and max(days) > 10 * min(days):
        from matplotlib.ticker import FuncFormatter

        ax.set_xscale("log")
        plain = FuncFormatter(lambda v, _: f"{v:g}")  # 4, 10, 20 rather than 4x10^0
        ax.xaxis.set_major_formatter(plain)
        ax.xaxis.set_minor_formatter(plain)
    ax.set_xlabel(f"days to train {r.space.tokens:.3g} tokens ({BEFORE_FAILURES})")
    ax.set_ylabel("run cost (M USD)")
    ax.grid(alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)


def write_plot(r: SearchResult, path: Path) -> None:
    """The front (:func:`draw_front`) as a .png or .svg file."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5))
    draw_front(ax, r)
    ax.set_title(r.space.name)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
