"""Rendering of the reliability model: the goodput summary, the breakdown of lost time, the job-size sweep,
the validation table and the drill report."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from slowlink import units
from slowlink.report.tabular import tidy_key

if TYPE_CHECKING:
    from slowlink.drill.result import DrillResult, FailedSave
    from slowlink.reliability.goodput import Goodput
    from slowlink.reliability.validate import ReliabilityCase


def summary_table(name: str, g: Goodput) -> Table:
    """MTTF, interruptions, checkpoint interval, ETTR (closed form and Monte Carlo), days and GPU-hours."""
    js = g.to_json()
    table = tidy_key(Table(title=f"goodput of {name}: {g.gpus:,} GPUs, {g.tokens:.4g} tokens ({g.steps:,} steps "
                                 f"of {g.step_s:.3g} s)"), "column")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    rows = [
        ("MTTF (h)", f"{g.mttf_h:.3g}"),
        ("expected interruptions (failures + planned)",
         f"{js['expected_interruptions']:,.0f} ({g.expected_failures:,.0f} + {g.expected_planned:,.0f})"),
        ("recovery per failure (s): detect + restart + restore + commit lag",
         f"{g.recovery.total_s:.0f} = {g.recovery.detect_s:.0f} + {g.recovery.restart_s:.0f} + "
         f"{g.recovery.restore_s:.1f} + {g.recovery.commit_lag_s:.1f}"),
        _restart_row(g),
        (f"checkpoint stop (s, {g.checkpoint.mode}, {g.checkpoint.source})", f"{g.seg.checkpoint_s:.3g}"),
        ("best checkpoint interval (s): Daly 2006 / Young 1974 / exact", f"{g.daly_s:,.0f} / {g.young_s:,.0f} / "
         f"{g.exact_best_s:,.0f}"),
        (f"checkpoint interval used (s, {g.interval_source})", f"{g.interval_s:,.0f}"),
        ("ETTR closed form / Monte Carlo", f"{g.ettr:.3f} / {g.ettr_mc:.3f}"),
        ("ETTR at the best interval", f"{g.ettr_at_best:.3f}"),
        ("time to train (days)", f"{js['time_to_train_days']:.1f} (useful {js['useful_days']:.1f})"),
        ("GPU-hours", f"{js['gpu_hours']:,.0f}"),
    ]
    for k, v in rows:
        table.add_row(k, v)
    return table


def losses_table(g: Goodput) -> Table:
    """Expected days lost to each cause over the run (the step's own parts last)."""
    table = Table(title="where the days go (expected, over the run)")
    table.add_column("cause")
    table.add_column("days", justify="right")
    table.add_column("share of wall", justify="right")
    wall_days = g.wall_s / units.DAY
    for k, v in g.losses_days().items():
        table.add_row(k.replace("_", " "), f"{v:.3g}", f"{v / wall_days:.2%}")
    return table


def _restart_row(g: Goodput) -> tuple[str, str]:
    if g.restart_override_s is not None:
        return ("restart (s, reliability.restart_overhead_s)", f"{g.restart_override_s:.0f}")
    p = g.restart_parts
    return ("restart (s, a lower bound: no CUDA context, model build or sub-communicators): reschedule + "
            "process start + NCCL init (1 node) + all-to-one connections",
            f"{g.recovery.restart_s:.1f} = {p['reschedule_s']:.0f} + {p['process_start_s']:.2f} + "
            f"{p['nccl_init_base_s']:.2f} + {p['all_to_one_connect_s']:.1f}")


def sweep_table(g: Goodput) -> Table:
    """MTTF, the best interval and ETTR as the job grows, at this job's checkpoint and recovery costs."""
    table = Table(title="job size sweep (same checkpoint costs, restart at each size, Daly interval)")
    for col in ("GPUs", "MTTF (h)", "best interval (s)", "ETTR"):
        table.add_column(col, justify="right")
    for p in g.sweep:
        table.add_row(f"{p.gpus:,}", f"{p.mttf_h:.3g}", f"{p.best_interval_s:,.0f}", f"{p.ettr:.3f}")
    return table


def validation_table(cases: list[ReliabilityCase]) -> Table:
    """Predicted vs published for every reliability case, its error and source."""
    table = Table(title="reliability model vs published figures (reliability/data/published.yaml)")
    for col in ("case", "quantity", "predicted", "published", "error", "scored", "source"):
        table.add_column(col, justify="right" if col in ("predicted", "published", "error") else "left")
    for c in cases:
        hand = r" \[second-hand]" if c.second_hand else ""  # escaped: rich reads [..] as markup
        table.add_row(c.id, c.quantity, f"{c.predicted:.3g}", f"{c.published:.3g}", f"{c.error:+.1%}",
                      "yes" if c.scored else "no", c.source + hand)
    return table


def error_summary(cases: list[ReliabilityCase]) -> str:
    """The mean and max error over the scored cases, then kind by kind (an interval case checks the model against
    a published model's optimum, not a fleet, so its error is shown apart too)."""
    from slowlink.reliability.validate import summary

    s = summary(cases)
    if s is None:
        return "reliability error: no scored case"
    kinds = "; ".join(f"{k}: mean {v.mean_abs_error:.1%}, max {v.max_abs_error:.1%} over {v.scored_cases}"
                      for k, v in s.by_kind.items())
    return (f"reliability error: mean {s.mean_abs_error:.1%}, max {s.max_abs_error:.1%} over {s.scored_cases} "
            f"scored cases ({kinds})")


def drill_table(r: DrillResult) -> Table:
    """Measured recovery phases next to the recovery model's prediction, and the verdict's facts."""
    measured = r.measured.to_json()
    pred = {"detect_s": r.predicted.detect_s, "restart_s": r.predicted.restart_s, "restore_s": r.predicted.restore_s,
            "recompute_s": r.predicted_recompute_s}
    table = Table(title=f"fault drill: {r.fault}, {r.restarts} restart(s)")
    for col in ("phase", "measured (s)", "predicted (s)"):
        table.add_column(col, justify="right" if col != "phase" else "left")
    for k in ("detect_s", "restart_s", "restore_s", "recompute_s"):
        m = measured[k]
        table.add_row(k.removesuffix("_s"), f"{m:.2f}" if isinstance(m, float) else "-", f"{pred[k]:.2f}")
    tot = r.measured_recovery_s
    table.add_row("recovery", "-" if tot is None else f"{tot:.2f}", f"{r.predicted_recovery_s:.2f}")
    return table


def drill_lines(r: DrillResult) -> list[str]:
    """The verdict: recovered, state equal, steps lost, and the reason."""
    return [f"recovered: {'yes' if r.recovered else 'no'}; final state bit-identical to the uninterrupted run: "
            f"{'yes' if r.state_equal else 'no'}; committed steps lost: {r.committed_steps_lost}; uncommitted steps "
            f"lost (recomputed): {r.uncommitted_steps_lost}"
            + (f"; committed steps of a damaged checkpoint recomputed: {r.lost_committed_steps}" if r.fallback else ""),
            f"{'PASS' if r.ok else 'FAIL'}: {r.reason}"]


def refusal_line(s: FailedSave) -> str:
    """A drill that failed because the machine refused a checkpoint save (no space, no permission)."""
    return (f"the checkpoint save of step {s.step} failed on rank {s.rank}: {s.errno_name} ({s.error}); free space "
            "or fix the permissions where the checkpoints go, then run the drill again")


def goodput_sentence(g: Goodput) -> str:
    """One line for the plan: ETTR, MTTF and time-to-train of the token budget."""
    return (f"goodput: {g.tokens:.3g} tokens in {g.wall_s / units.DAY:.1f} days ({g.wall_s * g.gpus / units.HOUR:,.0f} "
            f"GPU-hours) at ETTR {g.ettr:.3f} (MTTF {g.mttf_h:.3g} h, checkpoint every {g.interval_s:,.0f} s)")
