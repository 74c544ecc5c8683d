"""Rendering benchmark results: nccl-tests-like collective tables, GEMM and training tables, comparisons."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.table import Table

from slowlink import units

if TYPE_CHECKING:
    from slowlink.bench.calibrate import PredictedPoint
    from slowlink.bench.compare import Move
    from slowlink.bench.record import CollectiveHalf, CollectiveRow, ComputeRow, TrainProfile, TrainRow


def _half_cells(h: CollectiveRow | CollectiveHalf | None) -> list[str]:
    if h is None:
        return ["n/a"] * 4
    wrong = "N/A" if h.wrong < 0 else str(h.wrong)
    algbw = "n/a" if h.algbw_gbyte_s is None else f"{h.algbw_gbyte_s:.3f}"
    return [f"{h.time_s / units.US:.1f}", algbw, f"{h.busbw_gbyte_s:.3f}", wrong]


def _shown(x: object) -> str:
    return "n/a" if x is None else str(x)


def collectives_table(rows: Sequence[CollectiveRow], title: str) -> Table:
    """size, count, type, redop, root | out-of-place time, algbw, busbw, #wrong | in-place the same."""
    t = Table(title=title)
    for col in ("size (B)", "count", "type", "redop", "root"):
        t.add_column(col, justify="right")
    for side in ("out-of-place", "in-place"):
        for col in ("time (us)", "algbw (GB/s)", "busbw (GB/s)", "#wrong"):
            t.add_column(f"{side}\n{col}", justify="right")
    for r in rows:
        t.add_row(str(r.size_bytes), _shown(r.count), r.type, r.redop, _shown(r.root),
                  *_half_cells(r), *_half_cells(r.in_place))
    return t


def _ms(x: float | None, fmt: str = ".1f") -> str:
    return "n/a" if x is None else f"{x / units.MS:{fmt}}"


def compute_table(rows: Sequence[ComputeRow], title: str) -> Table:
    """m, n, k, dtype, time, TFLOP/s."""
    t = Table("m", "n", "k", "dtype", "time (ms)", "TFLOP/s", title=title)
    for r in rows:
        t.add_row(str(r.m), str(r.n), str(r.k), r.dtype, _ms(r.time_s, ".3f"), f"{r.tflops:.3f}")
    return t


def train_table(rows: Sequence[TrainRow], title: str) -> Table:
    """Per rank count and mode: step, compute-only, exposed comm, ratio, MFU and the plan's prediction."""
    t = Table("mode", "ranks", "step (ms)", "compute (ms)", "exposed comm (ms)", "comm/compute", "MFU",
              "plan step (ms)", "plan error", title=title)
    for r in rows:
        plan = r.plan
        t.add_row(r.mode, str(r.ranks), _ms(r.step_time_s), _ms(r.compute_s), _ms(r.exposed_comm_s),
                  "n/a" if r.comm_compute_ratio is None else f"{r.comm_compute_ratio:.3f}",
                  "n/a" if r.mfu is None else f"{r.mfu:.1%}",
                  "n/a" if plan is None else _ms(plan.step_time_s),
                  "n/a" if plan is None else f"{plan.error_pct:+.1f}%")
    return t


def profile_table(row: TrainRow, profile: TrainProfile) -> Table:
    """A profiled row's ``profile`` (``bench train --profile``): per kernel class and idle, measured ms per step
    and its share of the profiled wall, and with a plan the model's ms, measured - model and the ratio."""
    prof, model = profile.model_dump(), None if row.plan is None else row.plan.profile
    title = (f"{row.ranks} ranks: rank 0's compute-only step by kernel class, profiled "
             f"{profile.wall_s / units.MS:.1f} ms/step against {_ms(row.compute_s)} ms unprofiled")
    t = Table("class", "measured (ms)", "share", "model (ms)", "measured - model (ms)", "measured / model",
              title=title)
    names = {"elementwise_copy_s": "  of which copies, casts", "wall_s": "total (wall)"}
    order = [k for k in prof if k not in names] + ["wall_s"]
    order.insert(order.index("elementwise_s") + 1, "elementwise_copy_s")
    for k in order:
        m = None if model is None else model.get(k)
        ratio = "n/a" if not m else f"{prof[k] / m:.2f}"
        t.add_row(names.get(k, k.removesuffix("_s")), f"{prof[k] / units.MS:.2f}",
                  f"{prof[k] / profile.wall_s:.1%}", "n/a" if m is None else f"{m / units.MS:.2f}",
                  "n/a" if m is None else f"{(prof[k] - m) / units.MS:+.2f}", ratio)
    return t


def compare_table(moves: Sequence[Move], title: str) -> Table:
    """key, baseline, result, change, tolerance, status."""
    t = Table("what", "metric", "baseline", "result", "change", "tolerance", "status", title=title)
    for m in moves:
        style = {"regressed": "bold red", "improved": "green"}.get(m.status, "")
        t.add_row(m.key, m.metric, f"{m.baseline:.4g}", f"{m.result:.4g}", f"{m.change_pct:+.1f}%",
                  f"{m.tolerance_pct:.0f}%", f"[{style}]{m.status}[/]" if style else m.status)
    return t


def predicted_table(points: Sequence[PredictedPoint], title: str) -> Table:
    """size, measured and predicted time and busbw, error."""
    t = Table("size (B)", "measured (us)", "predicted (us)", "measured busbw", "predicted busbw", "error",
              "algorithm", title=title)
    for p in points:
        t.add_row(f"{p.size_bytes:.0f}", f"{p.measured_time_s / units.US:.1f}", f"{p.predicted_time_s / units.US:.1f}",
                  f"{p.measured_busbw_gbyte_s:.3f}", f"{p.predicted_busbw_gbyte_s:.3f}", f"{p.error_pct:+.1f}%",
                  p.algorithm)
    return t
