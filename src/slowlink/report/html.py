"""Self-contained HTML reports (``--html FILE``): the inputs, the bottleneck in words, and the figures.

One page per run, nothing fetched at view time: CSS is inline and every figure is matplotlib (the 'plot'
extra) rendered to inline SVG with real text, so a browser needs no network and the page can be mailed.
The pages draw result objects the commands already computed (:class:`StepResult`, :class:`ScalePoint`,
:class:`Prediction`, the ``--compare`` points); nothing here runs a model.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from slowlink import units
from slowlink.errors import SlowlinkError, SpecError
from slowlink.report.page import figure_block, figure_svg, html_page, html_table, inputs_block, new_figure, write_page

if TYPE_CHECKING:
    from slowlink.assess import Assessment
    from slowlink.bench.calibrate import PredictedPoint
    from slowlink.collectives import Prediction
    from slowlink.scale import ScalePoint, Scaling
    from slowlink.spec.cluster import Cluster
    from slowlink.spec.workload import Workload
    from slowlink.workload.advice import Advice
    from slowlink.workload.step import StepResult

SUFFIXES = (".html", ".htm")
DIMS = ("tp", "cp", "ep", "pp", "dp")
# Step segments in drawing order, with the colour each keeps on every page (matplotlib's tab10 palette).
SEGMENTS = (("compute", "#4c72b0"), ("pipeline bubble", "#b0b0b0"), ("optimizer", "#8c6d31"),
            ("overlap contention", "#ccb974"), ("TP exposed", "#dd8452"), ("CP exposed", "#937860"),
            ("EP exposed", "#da8bc3"), ("PP exposed", "#8172b3"), ("DP exposed", "#c44e52"))
def check_html_path(path: Path | None) -> None:
    """Reject an output path before any work: it must end in .html/.htm, in an existing folder.

    Also checks that matplotlib (the 'plot' extra) imports, so a missing extra fails before a long run.
    """
    if path is None:
        return
    if path.suffix.lower() not in SUFFIXES:
        raise SpecError(f"--html ({str(path)!r}) must end in .html or .htm")
    if path.is_dir():
        raise SpecError(f"--html ({str(path)!r}) is a folder: give a file name ending in .html")
    if not path.parent.is_dir():
        raise SpecError(f"--html ({str(path)!r}): folder {str(path.parent)!r} does not exist")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise SlowlinkError("--html needs matplotlib, slowlink's 'plot' extra: pip install 'slowlink[plot]'") from None


# ---- plan ---------------------------------------------------------------------------------------------

def step_segments_s(r: StepResult) -> list[float]:
    """Seconds of each :data:`SEGMENTS` entry; they add up to the step time (step.py's composition)."""
    return [r.compute_s, r.bubble_s, r.optimizer_s, r.contention_s, *(r.comm_s.get(d, 0.0) for d in DIMS)]


def breakdown_svg(names: Sequence[str], results: Sequence[StepResult], salt: str = "plan",
                  share: bool = False) -> str:
    """Stacked horizontal bars, one per cluster: compute, bubble, optimizer, overlap contention, each
    dimension's exposed comm.

    In seconds, or with ``share`` in percent of each bar's step (for steps of very different lengths).
    """
    segs = [[v / r.step_time_s * 100 if share else v for v in step_segments_s(r)] for r in results]
    ends = [sum(s) for s in segs]
    with new_figure(salt, 10, 1.3 + 0.5 * len(names)) as (fig, (ax,)):
        left = [0.0] * len(names)
        for k, (label, colour) in enumerate(SEGMENTS):
            vals = [s[k] for s in segs]
            if not any(v > 0 for v in vals):
                continue
            bars = ax.barh(range(len(names)), vals, left=left, color=colour, label=label, height=0.6)
            for bar, v, r in zip(bars, vals, results, strict=True):
                if v >= 0.05 * max(ends):  # wide enough for its label
                    part = v / 100 if share else v / r.step_time_s
                    ax.text(bar.get_x() + bar.get_width() / 2, bar.get_y() + bar.get_height() / 2,
                            f"{part:.0%}", ha="center", va="center", color="white", fontsize=8)
            left = [a + v for a, v in zip(left, vals, strict=True)]
        for i, r in enumerate(results):
            ax.text(left[i], i, f"  {r.step_time_s:.3g} s, MFU {r.mfu:.0%}", va="center", fontsize=9)
        ax.set_yticks(range(len(names)), list(names))
        ax.invert_yaxis()
        ax.set_xlim(0, max(ends) * 1.25)
        if share:
            ax.set_xticks(range(0, 101, 20))
        ax.set_xlabel("share of the training step (%)" if share else "seconds per training step")
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize=9)
        ax.spines[["top", "right"]].set_visible(False)
        return figure_svg(fig, salt)


def _bottleneck_block(name: str, r: StepResult, advice: Sequence[Advice]) -> str:
    items = "".join(f"<li>{html.escape(a.change)}: step {r.step_time_s:.3f} &rarr; {a.step_time_s:.3f} s "
                    f"({a.gain:.0%} faster)</li>" for a in advice)
    warn = ("<p>warning: a TP group spans nodes; its collectives cross the network every layer</p>"
            if r.tp_spans_nodes else "")
    adv = f'<ul class="advice">{items}</ul>' if items else ""
    return (f'<div class="bottleneck"><b>{html.escape(name)}</b>'
            f'<span class="sentence">{html.escape(r.bottleneck)}</span>{warn}{adv}</div>')


def _plan_metrics(names: Sequence[str], results: Sequence[StepResult]) -> str:
    rows: list[list[object]] = [
        ["step time (s)", *(f"{r.step_time_s:.3f}" for r in results)],
        ["tokens/s", *(f"{r.tokens_per_s:,.0f}" for r in results)],
        ["MFU", *(f"{r.mfu:.1%}" for r in results)],
        ["compute (s)", *(f"{r.compute_s:.3f}" for r in results)],
        ["bubble (s)", *(f"{r.bubble_s:.3f}" for r in results)],
        ["exposed comm (s)", *(f"{r.exposed_comm_s:.3f}" for r in results)],
        ["overlap contention (s)", *(f"{r.contention_s:.3f}" for r in results)],
        ["memory per GPU (GiB)", *(f"{r.memory.total_bytes / units.GiB:.1f}" for r in results)]]
    for d in DIMS:
        if any(r.comm_total_s.get(d, 0.0) > 0 for r in results):
            rows.append([f"{d} exposed / total (s)",
                         *(f"{r.comm_s.get(d, 0.0):.3f} / {r.comm_total_s.get(d, 0.0):.3f}" for r in results)])
    return html_table(("", *names), rows, "metrics")


def plan_page(w: Workload, assessments: Sequence[Assessment], accuracy: Sequence[str]) -> str:
    """The page of ``slowlink plan`` of ``w``: bottleneck, advice, memory, ``accuracy`` (the model's measured error
    where it applies, report.plan.accuracy_sentence), goodput, cost and what was not priced per cluster, step
    breakdown, metrics, inputs."""
    from slowlink.report.assess import chain_lines

    clusters = [a.cluster for a in assessments]
    results = [a.step for a in assessments]
    names = [c.name for c in clusters]
    blocks = "".join(_bottleneck_block(n, a.step, a.advice) for n, a in zip(names, assessments, strict=True))
    memory = (r.memory.sentence(c.gpu.hbm_bytes) for c, r in zip(clusters, results, strict=True))
    blocks += "".join(f'<p class="memory"><b>{html.escape(n)}</b>: {html.escape(text)}</p>'
                      for n, text in zip(names, memory, strict=True))
    blocks += "".join(f'<p class="accuracy"><b>{html.escape(n)}</b>: {html.escape(text)}</p>'
                      for n, text in zip(names, accuracy, strict=True))
    blocks += "".join(f'<p class="chain"><b>{html.escape(n)}</b>: {html.escape(line)}</p>'
                      for n, a in zip(names, assessments, strict=True) for line in chain_lines(a))
    fig = figure_block(breakdown_svg(names, results), "Where each step goes: compute, pipeline bubble, "
                        "optimizer and the communication each parallel dimension leaves exposed.", "breakdown")
    body = (f"<h2>Bottleneck</h2>{blocks}<h2>Step time</h2>{fig}{_plan_metrics(names, results)}"
            f"{inputs_block(clusters, w)}")
    return html_page(f"slowlink plan: {w.name} on {', '.join(names)}", body)


def write_plan(path: Path, w: Workload, assessments: Sequence[Assessment], accuracy: Sequence[str]) -> None:
    write_page(path, plan_page(w, assessments, accuracy))


# ---- scale --------------------------------------------------------------------------------------------

def scale_svg(points: Sequence[ScalePoint], salt: str = "scale") -> str:
    """Left: scaling efficiency vs nodes (ideal = 100%). Right: comm/compute and each wait's share of the step."""
    nodes = [p.nodes for p in points]
    with new_figure(salt, 11, 4.0, ncols=2) as (fig, (ax1, ax2)):
        eff = [100 * p.efficiency for p in points]
        ax1.axhline(100, color="#999", ls="--", lw=1, label="ideal")
        ax1.plot(nodes, eff, "o-", color="#4c72b0", label="scaling efficiency")
        for n, e in zip(nodes, eff, strict=True):
            ax1.annotate(f"{e:.0f}%", (n, e), textcoords="offset points", xytext=(0, 7), ha="center", fontsize=8)
        ax1.set_ylim(0, 115)
        ax1.set_ylabel("per-GPU throughput vs smallest size (%)")
        ax1.set_title("scaling efficiency")
        ratio = [p.result.comm_compute_ratio for p in points]
        ax2.plot(nodes, ratio, "s-", color="#c44e52", label="comm / compute (total comm)")
        for d, (label, colour) in zip(DIMS, SEGMENTS[-len(DIMS):], strict=True):  # the exposed-comm segments
            share = [p.result.comm_s.get(d, 0.0) / p.result.step_time_s for p in points]
            if any(s > 0 for s in share):
                ax2.plot(nodes, share, ".--", color=colour, label=f"{label} / step")
        bubble = [p.result.bubble_s / p.result.step_time_s for p in points]
        if any(b > 0 for b in bubble):
            ax2.plot(nodes, bubble, ".--", color=SEGMENTS[1][1], label="bubble / step")
        ax2.set_ylim(bottom=0)
        ax2.set_title("communication vs compute")
        ax2.legend(fontsize=8, frameon=False)
        for ax in (ax1, ax2):
            ax.set_xscale("log", base=2)
            ax.set_xticks(nodes, [str(n) for n in nodes])
            ax.minorticks_off()
            ax.set_xlabel("nodes")
            ax.spines[["top", "right"]].set_visible(False)
        return figure_svg(fig, salt)


def scale_page(cluster: Cluster, w: Workload, s: Scaling, mode: str, reason: str) -> str:
    """The page of ``slowlink scale``: why efficiency falls, the curves, the table of sizes (a refused size with
    its reason), the inputs."""
    from slowlink.report.plan import refused_lines

    points = s.points
    rows: list[tuple[object, ...]] = [
        (p.nodes, p.gpus, p.global_batch, f"{p.tokens_per_s_per_gpu:,.0f}", f"{p.efficiency:.1%}",
         f"{p.result.comm_compute_ratio:.2f}", f"{p.result.step_time_s:.3f}", f"{p.result.exposed_comm_s:.3f}",
         f"{p.result.bubble_s:.3f}") for p in points]
    rows = sorted(rows + [(x.nodes, x.gpus, "-", "infeasible", "-", "-", "-", "-", "-") for x in s.refused],
                  key=lambda r: int(str(r[0])))
    refused = "".join(f'<p class="meta">{html.escape(line)}</p>' for line in refused_lines(s))
    table = html_table(("nodes", "GPUs", "batch", "tok/s/GPU", "efficiency", "comm/compute", "step s",
                    "exposed comm s", "bubble s"), rows, "metrics")
    fig = figure_block(scale_svg(points), f"{w.name} on {cluster.name} resized ({mode}): per-GPU "
                        "efficiency, and what grows with the node count.", "scaling")
    breakdown = figure_block(breakdown_svg([f"{p.nodes} nodes" for p in points], [p.result for p in points],
                                            "scale-breakdown", share=True), "Step breakdown at each size.", "breakdown")
    body = (f'<h2>Bottleneck</h2><div class="bottleneck"><span class="sentence">{html.escape(reason)}</span>'
            f"</div><h2>Scaling</h2>{fig}{table}{refused}{breakdown}{inputs_block([cluster], w)}")
    return html_page(f"slowlink scale: {w.name} on {cluster.name}", body)


def write_scale(path: Path, cluster: Cluster, w: Workload, s: Scaling, mode: str, reason: str) -> None:
    write_page(path, scale_page(cluster, w, s, mode, reason))


# ---- collective ---------------------------------------------------------------------------------------

def busbw_svg(sizes_bytes: Sequence[float], busbw_gbyte_s: Sequence[float], label: str,
              measured: Sequence[tuple[float, float]] = (), salt: str = "busbw") -> str:
    """busbw (GB/s) against size on a log2 axis; measured (size, busbw) points overlaid when given."""
    with new_figure(salt, 10, 4.2) as (fig, (ax,)):
        ax.plot(sizes_bytes, busbw_gbyte_s, "o-", ms=3, color="#4c72b0", label=label)
        if measured:
            ax.plot([m[0] for m in measured], [m[1] for m in measured], "x", ms=7, mew=2, color="#c44e52",
                    label="measured")
        ax.set_xscale("log", base=2)
        lo, hi = min(sizes_bytes), max(sizes_bytes)
        ticks = [2.0 ** k for k in range(0, 64, 2) if lo <= 2.0 ** k <= hi] or [lo]
        ax.set_xticks(ticks, [units.format_size(t) for t in ticks], rotation=45, ha="right", fontsize=8)
        ax.minorticks_off()
        ax.set_ylim(bottom=0)
        ax.set_xlabel("message size")
        ax.set_ylabel("busbw (GB/s)")
        ax.grid(alpha=0.3)
        ax.legend(frameon=False)
        ax.spines[["top", "right"]].set_visible(False)
        return figure_svg(fig, salt)


def collective_page(cluster: Cluster, preds: Sequence[Prediction]) -> str:
    """The page of ``slowlink collective --sweep``: the busbw curve, each size's algorithm and bottleneck."""
    p0, big = preds[0], max(preds, key=lambda p: p.size_bytes)
    fig = figure_block(busbw_svg([p.size_bytes for p in preds], [p.busbw_bytes_s / units.GB for p in preds],
                                  f"model ({p0.op}, {p0.ranks} ranks)"), "Bus bandwidth against message size "
                        "(nccl-tests' busbw).", "busbw")
    rows = [(units.format_size(p.size_bytes), f"{p.time_s / units.US:.2f}", f"{p.algbw_bytes_s / units.GB:.2f}",
             f"{p.busbw_bytes_s / units.GB:.2f}", p.algorithm, p.protocol, p.bottleneck) for p in preds]
    table = html_table(("size", "time (us)", "algbw GB/s", "busbw GB/s", "algorithm", "protocol", "bottleneck"), rows)
    sentence = f"at {units.format_size(big.size_bytes)}: {big.reason}"
    body = (f'<h2>Bottleneck</h2><div class="bottleneck"><span class="sentence">{html.escape(sentence)}</span>'
            f"</div><h2>Bus bandwidth</h2>{fig}{table}{inputs_block([cluster], None)}")
    return html_page(f"slowlink collective: {p0.op} x{p0.ranks} on {cluster.name}", body)


def compare_page(cluster: Cluster, points: Sequence[PredictedPoint], record: str) -> str:
    """The page of ``slowlink collective --compare``: the model's busbw line with the measured record on it."""
    pts = sorted(points, key=lambda p: float(p.size_bytes))
    sizes = [float(p.size_bytes) for p in pts]
    fig = figure_block(busbw_svg(sizes, [p.predicted_busbw_gbyte_s for p in pts], "model",
                                  [(s, p.measured_busbw_gbyte_s) for s, p in zip(sizes, pts, strict=True)]),
                        f"Model against the measured record {record}.", "busbw")
    errs = [abs(p.error_pct) for p in pts]
    rows = [(units.format_size(s), f"{p.predicted_busbw_gbyte_s:.2f}", f"{p.measured_busbw_gbyte_s:.2f}",
             f"{p.error_pct:+.1f}", p.algorithm) for s, p in zip(sizes, pts, strict=True)]
    sentence = (f"{pts[0].op} x{pts[0].ranks}: time error mean {sum(errs) / len(errs):.1f}%, "
                f"max {max(errs):.1f}% over {len(pts)} sizes")
    body = (f'<h2>Model vs measured</h2><div class="bottleneck"><span class="sentence">{html.escape(sentence)}'
            f"</span></div>{fig}"
            f"{html_table(('size', 'predicted busbw GB/s', 'measured busbw GB/s', 'time error %', 'algorithm'), rows)}"
            f"{inputs_block([cluster], None)}")
    return html_page(f"slowlink collective: {pts[0].op} on {cluster.name} vs {record}", body)


def write_collective(path: Path, cluster: Cluster, preds: Sequence[Prediction]) -> None:
    write_page(path, collective_page(cluster, preds))


def write_compare(path: Path, cluster: Cluster, points: Sequence[PredictedPoint], record: str) -> None:
    write_page(path, compare_page(cluster, points, record))
