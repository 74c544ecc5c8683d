"""Rendering of the straggler models: a degraded part's cost per dimension, jitter against job size, and
the suspects `find-slow` names."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

if TYPE_CHECKING:
    from slowlink.probe.find import Suspect
    from slowlink.probe.slow import FindSlowResult
    from slowlink.straggler.degraded import DegradedCost
    from slowlink.straggler.sweep import JitterPoint

DIMS = ("tp", "cp", "ep", "pp", "dp", "compute")


def degraded_table(costs: list[DegradedCost]) -> Table:
    """Healthy against degraded step, one column per fidelity, and what each dimension's exposed time grew."""
    first = costs[0]
    table = Table(title=f"{first.workload} on {first.cluster}: degraded parts against the same cluster healthy")
    table.add_column("")
    for c in costs:
        table.add_column(c.fidelity, justify="right")
    table.add_row("healthy step (s)", *[f"{c.healthy.step_time_s:.4f}" for c in costs])
    table.add_row("degraded step (s)", *[f"{c.degraded.step_time_s:.4f}" for c in costs])
    table.add_row("slowdown", *[f"{c.slowdown:+.2%}" for c in costs])
    table.add_row("dimension that pays", *[c.pays for c in costs])
    for dim in DIMS:
        cells = [c.exposed_delta_s.get(dim, 0.0) for c in costs]
        totals = [c.total_delta_s.get(dim) for c in costs]
        if any(abs(x) > 0 for x in cells) or any(t for t in totals):
            table.add_row(f"  {dim} exposed / total +(s)", *[
                f"{x:+.4f} / {t:+.4f}" if t is not None else f"{x:+.4f}"
                for x, t in zip(cells, totals, strict=True)])
    for i, part in enumerate(first.parts):
        table.add_row(f"  alone: {part.part}", *[f"{c.parts[i].slowdown:+.2%}" for c in costs])
    return table


def degraded_sentence(c: DegradedCost) -> str:
    """One line: the job's slowdown, the dimension that pays and the part that costs the most."""
    if not c.parts:
        return f"{c.cluster}: no degraded parts (spec `degraded:` is empty)"
    worst = max(c.parts, key=lambda p: p.slowdown)
    unpriced = f" (not priced at this fidelity: {', '.join(c.unpriced)})" if c.unpriced else ""
    return (f"{c.fidelity}: step {c.healthy.step_time_s:.4g} -> {c.degraded.step_time_s:.4g} s "
            f"({c.slowdown:+.1%}); {c.pays} pays; the costliest part is {worst.part} "
            f"({worst.slowdown:+.1%} alone){unpriced}")


def jitter_table(points: list[JitterPoint], distribution: str, syncs: int) -> Table:
    """Expected step against GPU count and CV: closed form, Monte Carlo, their difference and the loss."""
    table = Table(title=f"per-rank jitter ({distribution}, {syncs} synchronisations per step): expected step "
                        "= sum over intervals of the max over ranks")
    for col in ("GPUs", "compute CV", "network CV", "mean step s", "closed form s", "Monte Carlo s", "CF vs MC",
                "loss"):
        table.add_column(col, justify="right")
    for p in points:
        table.add_row(f"{p.gpus:,}", f"{p.compute_cv:.0%}", f"{p.network_cv:.0%}", f"{p.mean_step_s:.4f}",
                      f"{p.closed_form_s:.4f}",
                      f"{p.monte_carlo_s:.4f} +- {p.monte_carlo_stderr_s:.1e}", f"{p.error:+.2%}", f"{p.loss:+.2%}")
    return table


def suspects_table(suspects: tuple[Suspect, ...] | list[Suspect], title: str) -> Table:
    """The parts the probes or records named, with their evidence."""
    table = Table(title=f"find-slow: {len(suspects)} suspect(s) from {title}")
    for col in ("kind", "id", "slowdown", "evidence"):
        table.add_column(col)
    for s in suspects:
        table.add_row(s.kind, s.id, s.words(), s.evidence)
    return table


def find_slow_lines(r: FindSlowResult) -> list[str]:
    """What was broken, and the whole collective measured against the models' prediction."""
    lines = [f"broken: {', '.join(r.injected)}" + (f"; not emulated: {', '.join(r.not_emulated)}"
                                                   if r.not_emulated else "")]
    ms = 1e3
    lines.append(f"{r.op} {r.size_bytes / 2**20:g} MiB measured {r.measured_healthy_s * ms:.1f} -> "
                 f"{r.measured_degraded_s * ms:.1f} ms ({r.measured_slowdown:+.0%})")
    for fid, (h, d) in r.predicted_s.items():
        lines.append(f"  predicted ({fid}): {h * ms:.1f} -> {d * ms:.1f} ms ({d / h - 1:+.0%}); degraded "
                     f"{d / r.measured_degraded_s - 1:+.1%} against measured")
    for fid, d in (r.predicted_from_found_s or {}).items():
        lines.append(f"  predicted ({fid}) from the parts found: {d * ms:.1f} ms "
                     f"({d / r.measured_degraded_s - 1:+.1%} against measured)")
    lines.append(f"whole run {r.wall_s:.0f} s")
    return lines
