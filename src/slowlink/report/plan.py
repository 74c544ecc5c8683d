"""Rendering of plan results and of the published-runs validation (rich tables)."""

from __future__ import annotations

from rich.table import Table

from slowlink.workload.step import StepResult
from slowlink.workload.validate import Case

_ROWS = (("step time (s)", "step_time_s", "{:.3f}"), ("tokens/s", "tokens_per_s", "{:,.0f}"),
         ("TFLOP/s per GPU (model)", "tflops_per_gpu", "{:.0f}"), ("MFU", "mfu", "{:.1%}"),
         ("HFU", "hfu", "{:.1%}"), ("compute (s)", "compute_s", "{:.3f}"), ("bubble (s)", "bubble_s", "{:.3f}"),
         ("exposed comm (s)", "exposed_comm_s", "{:.3f}"), ("memory per GPU (GiB)", "memory_gib_per_gpu", "{:.1f}"))


def plan_table(names: list[str], results: list[StepResult]) -> Table:
    """One column per cluster."""
    table = Table(title="slowlink plan")
    table.add_column("")
    for n in names:
        table.add_column(n, justify="right")
    js = [r.to_json() for r in results]
    for label, key, fmt in _ROWS:
        table.add_row(label, *(fmt.format(j[key]) for j in js))
    return table


def validate_table(cases: list[Case]) -> Table:
    table = Table(title="step time: predicted vs measured (published runs)")
    for col in ("case", "predicted (s)", "measured (s)", "error"):
        table.add_column(col, justify="right")
    for c in cases:
        table.add_row(c.id, f"{c.predicted_s:.2f}", f"{c.measured_s:.2f}", f"{c.error:+.1%}")
    return table
