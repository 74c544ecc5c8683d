"""Rendering of an :class:`~slowlink.assess.Assessment` (its JSON is ``Assessment.to_json``): the plan's table rows
for failures and cost, and the lines under the table (goodput, cost per token, what could not be priced)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.table import Table

    from slowlink.assess import Assessment
    from slowlink.sites.outages import SiteOutages


def chain_rows(assessments: list[Assessment]) -> list[tuple[str, list[str]]]:
    """Rows for the plan table, one cell per cluster: the step with its data stall, ETTR, USD per GPU-hour and
    per million tokens ("-" where not priced)."""
    def cell(v: float | None, fmt: str) -> str:
        return "-" if v is None else fmt.format(v)

    costs = [a.token_cost for a in assessments]
    return [("step with data stall (s)", [f"{a.step_time_s:.3f}" for a in assessments]),
            ("ETTR (failures, checkpoints)", [cell(None if a.failures is None else a.ettr, "{:.3f}")
                                              for a in assessments]),
            ("USD per GPU-hour", [cell(None if c is None else c.cost.usd_per_gpu_hour, "{:.3f}") for c in costs]),
            ("USD per million tokens", [cell(None if c is None else c.usd_per_million_tokens, "{:.4f}")
                                        for c in costs])]


def chain_lines(a: Assessment) -> list[str]:
    """Goodput of the budget, cost per token and its basis, then each part that could not be priced."""
    lines = [] if a.cross_site is None else [a.cross_site.sentence()]
    if a.outages is not None:
        lines.append(outage_line(a.outages))
    if a.goodput is not None:
        from slowlink.report.goodput import goodput_sentence

        lines.append(goodput_sentence(a.goodput))
    tc = a.token_cost
    if tc is not None:
        run = "" if a.run_usd is None else f"; the budget {a.run_usd:,.0f} USD"
        basis = a.ettr_basis if a.failures is not None else tc.basis  # the failures line says why
        lines.append(f"cost: {tc.usd_per_million_tokens:.4f} USD per million tokens at {a.tokens_per_s:,.0f} "
                     f"tokens/s {basis}, {tc.cost.usd_per_gpu_hour:.3f} USD per GPU-hour{run}")
    return lines + [u.sentence() for u in a.unpriced]


def outage_line(o: SiteOutages) -> str:
    """The sites' outages in one line: each one's share of the wall time and what the job does, then the gaps."""
    parts = [f"{x.what}: {x.share * 100:.3g}% of the time ({x.behaviour})" for x in o.outages]
    gaps = [f"not priced: {u}" for u in o.unpriced]
    return f"site outages ({o.method}): ETTR x {o.ettr:.4f}; " + "; ".join(parts + gaps)


def grouped_lines(per_cluster: list[tuple[str, list[str]]]) -> list[str]:
    """Each distinct line once, led by the clusters it applies to (``a, b: the same sentence``), in first-seen
    order: a budget none of them has is said once, not once per column."""
    groups: dict[str, list[str]] = {}
    for name, lines in per_cluster:
        for line in lines:
            groups.setdefault(line, []).append(name)
    return [f"[bold]{', '.join(names)}[/]: {line}" for line, names in groups.items()]


def plan_report(fits: dict[str, Assessment], infeasible: dict[str, str], fidelity: str) -> tuple[Table, list[str]]:
    """``slowlink plan`` in the terminal: the table (one column per cluster, the infeasible ones marked) and the
    lines under it: bottleneck and advice, memory, why a cluster cannot run it, accuracy, then goodput, cost and
    what was not priced."""
    from slowlink.report.plan import accuracy_lines, bottleneck_lines, plan_table
    from slowlink.report.storage import storage_rows

    names, found = list(fits), list(fits.values())
    table = plan_table(names, [a.step for a in found], storage_rows([a.storage for a in found]) + chain_rows(found),
                       infeasible)
    lines = bottleneck_lines(names, [a.step for a in found], [list(a.advice) for a in found],
                             [a.storage.sentence() if a.storage.dominates else "" for a in found])
    lines += [f"[bold]{key}[/]: {a.step.memory.sentence(a.cluster.gpu.hbm_bytes)}" for key, a in fits.items()]
    lines += [f"[bold]{key}[/]: infeasible: {why}" for key, why in infeasible.items()]
    lines += accuracy_lines(names, [a.accuracy for a in found], fidelity)
    return table, lines + grouped_lines([(key, chain_lines(a)) for key, a in fits.items()])
