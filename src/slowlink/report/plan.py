"""Rendering of plan results, scaling sweeps and the published-runs validation (rich tables)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from slowlink.report.tabular import tidy_key
from slowlink.workload.step import DIM_WORDS, StepResult

if TYPE_CHECKING:  # `plan` renders neither a scale sweep nor the validation: their modules load when they do
    from slowlink.scale import Scaling
    from slowlink.workload.accuracy import Accuracy, RunGroup
    from slowlink.workload.advice import Advice
    from slowlink.workload.validate import Case

_ROWS = (("step time (s)", "step_time_s", "{:.3f}"), ("tokens/s", "tokens_per_s", "{:,.0f}"),
         ("TFLOP/s per GPU (model)", "tflops_per_gpu", "{:.0f}"), ("MFU", "mfu", "{:.1%}"),
         ("HFU", "hfu", "{:.1%}"), ("compute (s)", "compute_s", "{:.3f}"), ("bubble (s)", "bubble_s", "{:.3f}"),
         ("exposed comm (s)", "exposed_comm_s", "{:.3f}"), ("overlap contention (s)", "overlap_contention_s", "{:.3f}"),
         ("comm / compute", "comm_compute_ratio", "{:.2f}"),
         ("memory per GPU (GiB)", "memory_gib_per_gpu", "{:.1f}"))


def plan_table(names: list[str], results: list[StepResult], extra: list[tuple[str, list[str]]] | None = None,
               infeasible: dict[str, str] | None = None) -> Table:
    """One column per cluster; exposed and total seconds of every dimension that communicates; then the
    ``extra`` rows (label, one cell per cluster), e.g. the storage model's. Each of ``infeasible`` (name ->
    reason) gets a column of its own, marked infeasible (the reason is printed below)."""
    table = tidy_key(Table(title="slowlink plan"), "cluster")
    table.add_column("")
    for n in [*names, *(infeasible or {})]:
        table.add_column(n, justify="right")
    none = ["-"] * len(infeasible or {})
    js = [r.to_json() for r in results]
    for i, (label, key, fmt) in enumerate(_ROWS):
        table.add_row(label, *(fmt.format(j[key]) for j in js), *(["infeasible"] * len(none) if i == 0 else none))
    for dim in ("tp", "cp", "ep", "pp", "dp"):
        if any(r.comm_total_s.get(dim, 0.0) > 0 for r in results):
            table.add_row(f"  {dim} exposed / total (s)",
                          *(f"{r.comm_s[dim]:.3f} / {r.comm_total_s[dim]:.3f}" for r in results), *none)
            table.add_row(f"  {dim} collectives per step",
                          *(f"{r.collectives_per_step.get(dim, 0.0):,.0f}" for r in results), *none)
    if any(r.tp_spans_nodes for r in results):
        table.add_row("TP group spans nodes", *("YES (over the network)" if r.tp_spans_nodes else "no"
                                                 for r in results), *none)
    for label, cells in extra or []:
        table.add_row(label, *cells, *none)
    return table


def bottleneck_lines(names: list[str], results: list[StepResult], advice: list[list[Advice]],
                     storage: list[str] | None = None) -> list[str]:
    """The bottleneck in words (``storage``'s sentence, when given for a cluster, comes first: storage waits
    longer than any communication), then each checked piece of advice with its re-run step time and gain."""
    lines: list[str] = []
    for i, (name, r, adv) in enumerate(zip(names, results, advice, strict=True)):
        first = storage[i] if storage and storage[i] else ""
        lines.append(f"[bold]{name}[/]: {first}; then {r.bottleneck}" if first else f"[bold]{name}[/]: {r.bottleneck}")
        if r.tp_spans_nodes:
            lines.append("  warning: a TP group spans nodes; its collectives cross the network every layer")
        for a in adv:
            step = "step with its storage" if a.with_storage else "step"
            lines.append(f"  advice: {a.change}: {step} {a.base_s:.3f} -> {a.step_time_s:.3f} s "
                         f"({a.gain:.0%} faster, re-run of the model)")
    return lines


def scale_table(s: Scaling, mode: str) -> Table:
    """Per-GPU throughput, efficiency, comm/compute and each dimension's exposed seconds per size; a refused size
    is a row of its own ("infeasible", the reason below the table: :func:`refused_lines`)."""
    table = Table(title=f"slowlink scale ({mode})")
    for col in ("nodes", "GPUs", "batch", "tok/s/GPU", "eff", "comm/comp", "DP exp s", "other s", "bubble s"):
        table.add_column(col, justify="right")
    rows: list[tuple[int, list[str]]] = []
    for p in s.points:
        r = p.result
        other = r.exposed_comm_s - r.comm_s["dp"]
        cross = p.assessment.cross_site
        dp = r.comm_s["dp"] + (cross.exposed_s if cross is not None else 0.0)  # the sync across sites is DP's
        rows.append((p.nodes, [str(p.nodes), str(p.gpus), str(p.global_batch), f"{p.tokens_per_s_per_gpu:,.0f}",
                               f"{p.efficiency:.1%}", f"{r.comm_compute_ratio:.2f}", f"{dp:.3f}",
                               f"{other:.3f}", f"{r.bubble_s:.3f}"]))
    rows += [(x.nodes, [str(x.nodes), str(x.gpus), "-", "infeasible", "-", "-", "-", "-", "-"]) for x in s.refused]
    for _, cells in sorted(rows, key=lambda r: r[0]):
        table.add_row(*cells)
    return table


def refused_lines(s: Scaling) -> list[str]:
    """One line per refused size: ``16 nodes: infeasible: WHY``."""
    return [f"{x.label}: infeasible: {x.why}" for x in s.refused]


def scale_reason(s: Scaling) -> str:
    """Why efficiency falls: the wait that grew most from the smallest to the largest size that runs, in words."""
    points = s.points
    first, last = points[0].result, points[-1].result
    growth = {d: last.comm_s[d] / last.step_time_s - first.comm_s[d] / first.step_time_s for d in last.comm_s}
    growth["pp_bubble"] = last.bubble_s / last.step_time_s - first.bubble_s / first.step_time_s
    dim = max(growth, key=lambda k: growth[k])
    eff = points[-1].efficiency
    if growth[dim] <= 0.01:
        return f"efficiency {eff:.0%} at {points[-1].nodes} nodes: no wait grows with the node count"
    what = "the pipeline bubble" if dim == "pp_bubble" else DIM_WORDS[dim]
    text = (f"efficiency {eff:.0%} at {points[-1].nodes} nodes: {what} grows from "
            f"{(first.bubble_s if dim == 'pp_bubble' else first.comm_s[dim]) / first.step_time_s:.0%} to "
            f"{(last.bubble_s if dim == 'pp_bubble' else last.comm_s[dim]) / last.step_time_s:.0%} of the step")
    if last.bottleneck_dim == dim:
        text += f"; at {points[-1].nodes} nodes: {last.bottleneck}"
    return text


def validate_table(cases: list[Case], title: str) -> Table:
    table = Table(title=title)
    q = cases[0].quantity if cases else "value"
    for col in ("case", f"predicted {q}", f"measured {q}", "error"):
        table.add_column(col, justify="right")
    for c in cases:
        fmt = "{:.2f}" if c.quantity.startswith("step") else "{:.1%}"
        table.add_row(c.id, fmt.format(c.predicted_s), fmt.format(c.measured_s), f"{c.error:+.1%}")
    return table


def validation_json(cases: list[Case]) -> dict[str, object]:
    """One set of ``slowlink validate --json``: each case (predicted, measured, error) and the mean and max
    |error|; ``quantity`` says what was compared (step time in s, or MFU as a fraction)."""
    from slowlink.workload.validate import breakdown, mean_abs_error

    return {"quantity": cases[0].quantity if cases else None,
            "cases": [{"id": c.id, "predicted": c.predicted_s, "measured": c.measured_s, "error": c.error}
                      for c in cases],
            "mean_abs_error": mean_abs_error(cases), "max_abs_error": max((abs(c.error) for c in cases), default=0.0),
            "by": {label: {k: {"cases": n, "mean_abs_error": m, "mean_error": b} for k, (n, m, b) in groups.items()}
                   for label, groups in breakdown(cases).items()}}


def breakdown_text(cases: list[Case]) -> str:
    """One line per grouping: each source's (or GPU's) mean |error|, mean signed error (bias) and case count."""
    from slowlink.workload.validate import breakdown

    def group(k: str, n: int, m: float, b: float) -> str:
        return f"{k} {m:.1%} (bias {b:+.1%}, n={n})"

    return "\n".join(f"  by {label}: " + "; ".join(group(k, *v) for k, v in groups.items())
                     for label, groups in breakdown(cases).items())


def error_summary(cases: list[Case], what: str) -> str:
    from slowlink.workload.validate import mean_abs_error

    return (f"{what} error: mean {mean_abs_error(cases):.1%}, max {max(abs(c.error) for c in cases):.1%} "
            f"over {len(cases)} cases")


def _longer(e: float) -> str:
    """A mean signed MFU error as what it means for the step: measured longer (positive) or shorter."""
    return f"{abs(e):.1%} {'longer' if e >= 0 else 'shorter'}"


def accuracy_sentence(a: Accuracy, fidelity: str = "analytical") -> str:
    """What the held-out runs say about a plan: the runs alike (GPU, TP, ZeRO-3) and all on its GPU, or that
    none was published on it, then those of its stack (plain text: the terminal and the HTML report print it). The
    runs were priced by the analytical model; a plan at another ``fidelity`` is told so."""
    sharded = " with ZeRO-3" if a.sharded_params else ""
    label = "accuracy" if fidelity == "analytical" else "accuracy (of the analytical model)"
    st = a.same_stack
    stack = (f"; stack {a.stack}: {st.n} held-out runs, {_longer(st.mean_error)} (|error| {st.mean_abs_error:.1%})"
             if st.n else f"; no held-out run of stack {a.stack}")
    if not a.same_gpu.n:
        return (f"{label} unmeasured: no held-out published run on {a.gpu} (runs on "
                f"{', '.join(a.gpus_measured)}; slowlink validate){stack}")

    def measured(g: RunGroup, runs: str) -> str:
        return (f"on {runs} measured steps were {_longer(g.mean_error)} than predicted on average "
                f"(|error| {g.mean_abs_error:.1%}, {g.low:+.1%} to {g.high:+.1%})")

    every = f"{a.same_gpu.n} held-out {a.gpu} runs"
    if not a.alike.n:
        return (f"{label}: no held-out {a.gpu} run at TP {a.tp}{sharded}; {measured(a.same_gpu, every)}{stack}; "
                "slowlink validate lists them")
    same = a.same_gpu
    return (f"{label}: {measured(a.alike, f'{a.alike.n} held-out {a.gpu} runs at TP {a.tp}{sharded}')}; all "
            f"{every}: {_longer(same.mean_error)} (|error| {same.mean_abs_error:.1%}){stack}; slowlink validate "
            "lists them")


def accuracy_lines(names: list[str], accs: list[Accuracy], fidelity: str = "analytical") -> list[str]:
    """One :func:`accuracy_sentence` per distinct (GPU, TP, ZeRO-3), led by the clusters it applies to."""
    groups: dict[str, list[str]] = {}
    for name, a in zip(names, accs, strict=True):
        groups.setdefault(accuracy_sentence(a, fidelity), []).append(name)
    return [f"[bold]{', '.join(keys)}[/]: {text}" for text, keys in groups.items()]
