"""Rendering of what :mod:`slowlink.trace` reads from profiler traces: a table per rank, one per collective, and
the article's sentence: the compute/communication ratio and the communication no computation hides."""

from __future__ import annotations

import json
from collections.abc import Sequence

from rich.markup import escape
from rich.table import Table

from slowlink import units
from slowlink.spec.cluster import Cluster
from slowlink.trace.calibrate import TraceCalibration
from slowlink.trace.result import TraceRank, TraceSummary


def _ms(x: float) -> str:
    return f"{x * 1e3:.2f}"


def _share(part: float, whole: float) -> str:
    return f"{part / whole:.0%}" if whole > 0 else "-"


def ranks_table(s: TraceSummary) -> Table:
    """One row per rank: steps, mean step, the window's kernel span and its split, overlap, exposed comm."""
    where = f"{s.device_name or s.ranks[0].device}, {s.backend or 'unknown backend'}, world {s.world_size or '?'}"
    t = Table(title=f"{len(s.ranks)} trace(s) ({escape(where)}), milliseconds over each rank's analysed steps")
    for col in ("rank", "steps", "step mean", "window steps", "span", "compute", "communication", "memory", "idle",
                "comm/comp overlap", "exposed comm", "comm/compute"):
        t.add_column(col, justify="right")
    for r in s.ranks:
        t.add_row(str(r.rank), str(r.steps), _ms(r.step_mean_s), str(r.window_steps), _ms(r.kernel_s),
                  _ms(r.compute_s), _ms(r.communication_s), _ms(r.memory_s), _ms(r.idle_s),
                  f"{r.comm_comp_overlap:.1%}", _ms(r.exposed_comm_s),
                  f"{r.comm_compute_ratio:.2f}" if r.compute_s > 0 else "-")
    return t


def collectives_table(s: TraceSummary) -> Table:
    """One row per collective, size, dtype and group: calls, mean time, algbw and busbw (nccl-tests)."""
    t = Table(title="collectives (time: mean per call, waiting for the group included; busbw: nccl-tests)")
    for col in ("op", "size", "dtype", "group", "ranks", "calls", "time (ms)", "algbw (GB/s)", "busbw (GB/s)"):
        t.add_column(col, justify="right")
    for c in s.collectives:
        t.add_row(c.op, units.format_size(c.size_bytes) if c.size_bytes is not None else "-", c.dtype or "-",
                  escape(c.group or "-"), str(c.group_size or "-"), str(c.calls), _ms(c.time_s),
                  f"{c.algbw_bytes_s / units.GB:.2f}" if c.algbw_bytes_s is not None else "-",
                  f"{c.busbw_bytes_s / units.GB:.2f}" if c.busbw_bytes_s is not None else "-")
    return t


def classes_line(r: TraceRank) -> str:
    """A rank's computation by class (GPU: its kernels, summed over streams; CPU: its ops' self time), per
    analysed step."""
    if not r.compute_classes:
        return ""
    per = max(r.window_steps, 1)
    parts = ", ".join(f"{k} {_ms(v / per)}" for k, v in r.compute_classes.items() if v > 0)
    what = "computation kernels per step by class (ms, summed over streams)" if r.device != "cpu" else \
        "computation per step by class (ms, ops' self time)"
    return f"rank {r.rank}: {what}: {parts}"


SHAPES_SHOWN = 3  # per class, in the table view (--json lists every shape)


def shapes_lines(r: TraceRank) -> list[str]:
    """The op shapes that take the most time in each class (record_shapes' Input Dims), per step."""
    per = max(r.window_steps, 1)
    lines = []
    for cls in dict.fromkeys(x.cls for x in r.shapes):
        top = [x for x in r.shapes if x.cls == cls][:SHAPES_SHOWN]
        total = r.compute_classes.get(cls, 0.0)
        parts = "; ".join(f"{x.op} {json.dumps(x.dims, separators=(',', ':'))} {x.dtype or ''} x{x.calls / per:.3g} "
                          f"{_ms(x.time_s / per)} ms ({_share(x.time_s, total)})" for x in top)
        lines.append(f"rank {r.rank} {cls} by shape (per step): {parts}")
    return lines


def sentence(r: TraceRank) -> str:
    """The article's measure for one rank: compute against communication, and what of it is exposed."""
    per = max(r.window_steps, 1)
    if r.communication_s == 0:
        return (f"rank {r.rank}: {_ms(r.compute_s / per)} ms of computation per step and no communication "
                f"kernel: nothing to hide; idle {_share(r.idle_s, r.kernel_s)} of the span.")
    ratio = f"{r.comm_compute_ratio:.2f}" if r.compute_s > 0 else "inf"
    return (f"rank {r.rank}: per step {_ms(r.compute_s / per)} ms computing and {_ms(r.communication_s / per)} ms "
            f"communicating (communication/computation {ratio}); {r.comm_comp_overlap:.0%} of the communication "
            f"runs under computation, so {_ms(r.exposed_comm_s / per)} ms per step is exposed "
            f"({_share(r.exposed_comm_s, r.kernel_s)} of the span).")


def calibration_lines(cal: TraceCalibration, targets: Sequence[Cluster] = ()) -> list[str]:
    """What the trace measured against what the model said on the trace's cluster, what stays modelled, and the
    computation by class on each target cluster with another GPU."""
    lines = [f"trace ({len(cal.summary.ranks)} rank(s), on {cal.trace_cluster}): compute x{cal.compute_scale:.3g} "
             "to return the traced step there; measured:"]
    for t in cal.measured:
        got = "-" if t.measured_s is None else _ms(t.measured_s)
        model = "-" if t.model_s is None else _ms(t.model_s)
        scale = "" if t.scale is None else f", x{t.scale:.3g}"
        lines.append(f"  {t.term}: measured {got} ms, model {model} ms{scale} ({t.note})")
    lines += [f"  modelled: {m}" for m in cal.to_json()["modelled"]]
    lines.append(f"  the step split (measured compute x{cal.measured_compute_scale:.3g}), measured / modelled / "
                 "residual:")
    for st in cal.terms:
        got = "-" if st.measured_s is None else _ms(st.measured_s)
        model = "-" if st.modelled_s is None else _ms(st.modelled_s)
        rest = "-" if st.residual_s is None else _ms(st.residual_s)
        lines.append(f"    {st.term}: {got} / {model} / {rest} ms ({st.carried})")
    gpus = [c.gpu for c in targets if c.gpu != cal.traced_on.gpu]
    for gpu in [g for i, g in enumerate(gpus) if g not in gpus[:i]]:
        pred = cal.prediction(gpu)
        lines.append(f"  compute on {gpu.name} (op by op from {pred.trace_gpu}): {_ms(cal.compute_on_s(gpu))} ms per "
                     f"step against {_ms(cal.calibrated_compute_s)}; kernels by class, measured -> predicted:")
        lines += [f"    {p.cls}: {_ms(p.measured_s)} -> {_ms(p.predicted_s)} ms (x{p.ratio:.3g}; {p.source})"
                  for p in pred.classes if p.measured_s > 0]
    return lines
