"""Rendering of the emulate area: the plan of an emulated cluster (``slowlink emulate up|status``) and
``slowlink validate emulated``'s measured against predicted time for each case and fidelity, with the
warning when a rank was CPU-bound during a measurement; ``slowlink emulate sites``' runs across two sites."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from slowlink import units

if TYPE_CHECKING:
    from slowlink.emulate.plan import Plan
    from slowlink.emulate.sites import SitesValidation
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


def plan_summary(plan: Plan) -> str:
    """A few lines for the terminal: run id, topology, nodes with their addresses, links with their rates."""
    lines = [f"emulation {plan.run_id}: {plan.topology}, {len(plan.nodes)} nodes, {plan.rails} rail(s), "
             f"scale {plan.scale:g}"]
    lines += [f"  node {k}: {ns} {', '.join(plan.address(k, r) for r in range(plan.rails))}"
              for k, ns in enumerate(plan.nodes)]
    for x in plan.links:
        extra = (f", +{x.delay_s / units.MS:g} ms" if x.delay_s else "") + (f", {x.loss:.2%} loss"
                                                                              if x.loss else "")
        lines.append(f"  link {x.name}: {x.a} <-> {x.b} {x.rate_bytes_s / units.Mbit:g} Mbit/s{extra}")
    return "\n".join(lines)


def sites_table(v: SitesValidation) -> Table:
    """DDP and DiLoCo over the emulated long haul: measured and planned step and bytes per step, and the errors."""
    table = Table(title=f"emulated two sites: long haul {v.runs[0].dci_bytes_s / units.MB:.2f} MB/s of TCP payload, "
                        f"RTT {v.rtt_s / units.MS:g} ms asked, {v.measured_rtt_s / units.MS:.1f} ms measured")
    for col in ("method", "params", "steps", "step s", "plan s", "error", "compute s", "MB/step/site", "plan MB",
                "error"):
        table.add_column(col, justify="right")
    for r in v.runs:
        table.add_row(r.method if r.method == "ddp" else f"{r.method} H={r.inner_steps} {r.outer_dtype}",
                      f"{r.params:,}",
                      str(r.steps), f"{r.step_s:.3f}", f"{r.predicted_step_s:.3f}", f"{r.step_error:+.1%}",
                      f"{r.compute_s:.4f}", f"{r.bytes_per_step / units.MB:.3f}",
                      f"{r.predicted_bytes_per_step / units.MB:.3f}", f"{r.bytes_error:+.1%}")
    return table
