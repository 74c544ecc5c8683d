"""Rendering of ``slowlink validate emulated``: measured against predicted time for each case and fidelity,
and the warning when a rank was CPU-bound during a measurement."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

if TYPE_CHECKING:
    from slowlink.emulate.validate import Row


def validation_table(rows: list[Row]) -> Table:
    """One row per case and fidelity: median, best and predicted time, both errors and the CPU load."""
    table = Table("case", "median s", "best s", "predicted s", "fidelity", "error (median)", "error (best)",
                  "cpu busy / rank")
    for r in rows:
        table.add_row(r.case, f"{r.measured_s:.4f}", f"{r.best_s:.4f}", f"{r.predicted_s:.4f}", r.fidelity,
                      f"{r.error:+.1%}", f"{r.best_error:+.1%}",
                      f"{r.cpu_busy:.0%} / {r.rank_cpu:.0%}" + (" CPU-LIMITED" if r.cpu_limited else ""))
    return table


def cpu_warning(rows: list[Row]) -> str | None:
    """The sentence to print when a measurement may show the CPUs rather than the links, else None."""
    if not any(r.cpu_limited for r in rows):
        return None
    return ("warning: a rank was busy on the CPU for much of a measurement, so it may show the CPU limit, not "
            "the links: lower --scale")
