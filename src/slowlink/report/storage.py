"""Rendering of the storage model: the checkpoint size, the plan's storage rows and the validation table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from slowlink import units

if TYPE_CHECKING:
    from slowlink.storage.checkpoint import CheckpointSize
    from slowlink.storage.plan import StoragePlan
    from slowlink.storage.validate import NotScored, StorageCase


def size_table(name: str, size: CheckpointSize) -> Table:
    """Bytes of each part of one checkpoint, per parameter and in total."""
    table = Table(title=f"checkpoint of {name}: {size.params / 1e9:,.2f} billion parameters")
    for col in ("part", "bytes / param", "GB"):
        table.add_column(col, justify="right")
    for part, b in size.parts.items():
        table.add_row(part, f"{b / size.params:g}", f"{b / units.GB:,.1f}")
    table.add_row("total", f"{size.bytes_per_param:g}", f"{size.total_bytes / units.GB:,.1f}")
    return table


def _fmt(value: float | None, fmt: str = "{:.3f}") -> str:
    return "-" if value is None else fmt.format(value)


def storage_rows(plans: list[StoragePlan]) -> list[tuple[str, list[str]]]:
    """Rows for the plan table: demand, data stall and checkpoint costs per step, one value per cluster."""
    def ck(p: StoragePlan, attr: str) -> float | None:
        return None if p.checkpoint is None else float(getattr(p.checkpoint, attr))

    return [
        ("read demand (GB/s, 1 GB/s/GPU rule)",
         [f"{p.feed.demand_bytes_s / units.GB:.3g} ({p.feed.rule_of_thumb_bytes_s / units.GB:.0f})" for p in plans]),
        ("data stall (s/step)", [_fmt(p.data_stall_s) for p in plans]),
        ("checkpoint (s/step, amortised)", [_fmt(p.checkpoint_overhead_s) for p in plans]),
        ("checkpoint size (GB)", [f"{p.size.total_bytes / units.GB:,.0f}" for p in plans]),
        ("checkpoint write / blocking (s)",
         [f"{_fmt(ck(p, 'write_s'), '{:.1f}')} / {_fmt(ck(p, 'blocking_s'), '{:.2f}')}" for p in plans]),
        ("checkpoint restore (s)", [_fmt(ck(p, "restore_s"), "{:.1f}") for p in plans]),
        ("checkpoints that fit", ["-" if p.capacity is None or p.capacity.fit is None else str(p.capacity.fit)
                                  for p in plans]),
    ]


def validation_table(cases: list[StorageCase]) -> Table:
    """Predicted vs published, the error and the tolerance of every storage case."""
    table = Table(title="storage model vs published checkpoints and MLPerf Storage v1.0 / v2.0")
    for col in ("case", "quantity", "predicted", "published", "error", "tolerance"):
        table.add_column(col, justify="right")
    for c in cases:
        note = "" if c.scored else " (not scored)"
        if c.known_miss:
            note += " (miss, see below)"
        table.add_row(c.id, c.quantity, f"{c.predicted:.3g}", f"{c.measured:.3g}", f"{c.error:+.1%}{note}",
                      f"±{c.tolerance:.0%}")
    return table


def misses_and_unscored(cases: list[StorageCase], unscored: list[NotScored]) -> str:
    """Why each missed case misses, and why each published figure without the model's inputs is not scored."""
    lines = [f"miss {c.id} {c.quantity}: {c.known_miss}" for c in cases if c.known_miss]
    lines += [f"not scored {u.id} {u.quantity} ({u.published}): {u.reason} (source: {u.source})" for u in unscored]
    return "\n".join(lines)


def error_summary(cases: list[StorageCase]) -> str:
    scored = [abs(c.error) for c in cases if c.scored]
    return (f"storage error: mean {sum(scored) / len(scored):.1%}, max {max(scored):.1%} over {len(scored)} "
            "scored cases")
