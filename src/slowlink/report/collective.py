"""Rendering collective predictions and validation points: nccl-tests-like tables and JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from slowlink import units
from slowlink.units import DTYPE_BYTES

if TYPE_CHECKING:  # types only: rendering never loads the model
    from slowlink.collectives import Prediction
    from slowlink.collectives.validate import Point



def sweep_table(preds: list[Prediction], dtype: str, title: str) -> Table:
    """size, count, type, time (us), algbw, busbw (GB/s), algorithm, protocol, bottleneck."""
    t = Table(title=title)
    for col in ("size", "count", "type", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "algorithm",
                "protocol", "bottleneck"):
        t.add_column(col, justify="right" if col[0] in "sctab" and col != "algorithm" else "left")
    for p in preds:
        t.add_row(f"{p.size_bytes:.0f}", f"{int(p.size_bytes // DTYPE_BYTES[dtype])}", dtype,
                  f"{p.time_s / units.US:.2f}", f"{p.algbw_bytes_s / units.GB:.2f}",
                  f"{p.busbw_bytes_s / units.GB:.2f}", p.algorithm, p.protocol, p.bottleneck)
    return t


def validation_table(points: list[Point]) -> Table:
    """case, size, predicted, published, error %."""
    t = Table(title="collective model vs published nccl-tests busbw (GB/s)")
    for col in ("case", "size", "predicted", "published", "error %", "source"):
        t.add_column(col)
    for p in points:
        t.add_row(p.case, units.format_size(p.size_bytes), f"{p.predicted_gbyte_s:.1f}",
                  f"{p.published_gbyte_s:.1f}", f"{100 * p.error:+.1f}", p.source)
    return t
