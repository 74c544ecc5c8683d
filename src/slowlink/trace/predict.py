"""A traced rank's computation on another GPU, class by class and GEMM shape by GEMM shape: each measured time
times the ratio of the two GPUs' rates for that kind of work.

  gemm         per shape the trace links to an op (``aten::mm`` [[m, k], [k, n]], ``addmm``, ``bmm``, ``baddbmm``,
               ``linear``, ``matmul``): t x rate(trace GPU) / rate(target GPU) at that shape and the op's precision
               (:func:`slowlink.trace.rates.gemm_rate`); GEMM time with no linked shape: the ratio of the two GPUs'
               large-GEMM rates (peak x the catalog's GEMM fraction) in the workload's precision
  attention    per SDPA shape [batch, heads, seq, head dim]: the ratio of FlashAttention-2's measured rates
               (:func:`slowlink.trace.rates.attention_rate`) where a table covers both GPUs, else the ratio of the
               step model's attention-core GEMMs (scores and context) at that shape; unshaped: the GEMM ratio
  elementwise  memory bound: the ratio of the GPUs' elementwise bandwidths (measured by ``bench compute``, else
               HBM bandwidth: :func:`slowlink.workload.compute.elementwise_bw_bytes_s`)
  optimizer    the ratio of their measured AdamW seconds per parameter where both have one, else the elementwise
               ratio (a foreach AdamW streams its states: memory bound)
  other        kept as measured: kernels the classes do not know (and on a CPU, views and dispatch) have no rate to
               scale by
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slowlink import units
from slowlink.catalog import Gpu
from slowlink.trace.rates import attention_rate, gemm_rate
from slowlink.trace.result import OpShape, TraceRank
from slowlink.workload.compute import Gemm, elementwise_bw_bytes_s, gemm_time_s

_PRECISION_OF_TORCH = {t: p for p, t in units.PRECISION_TORCH.items()}


@dataclass(frozen=True)
class ClassPrediction:
    """One class's measured seconds per step on the trace's GPU and predicted seconds on the target's."""

    cls: str
    measured_s: float
    predicted_s: float
    source: str

    @property
    def ratio(self) -> float:
        return self.predicted_s / self.measured_s if self.measured_s > 0 else 1.0

    def to_json(self) -> dict[str, Any]:
        return {"class": self.cls, "measured_s": self.measured_s, "predicted_s": self.predicted_s,
                "ratio": self.ratio, "source": self.source}


@dataclass(frozen=True)
class ComputePrediction:
    """Every class of a rank's computation moved from one GPU to another (module docstring)."""

    trace_gpu: str
    target_gpu: str
    classes: tuple[ClassPrediction, ...]

    @property
    def measured_s(self) -> float:
        return sum(c.measured_s for c in self.classes)

    @property
    def predicted_s(self) -> float:
        return sum(c.predicted_s for c in self.classes)

    @property
    def ratio(self) -> float:
        """Predicted over measured computation (1 with nothing measured)."""
        return self.predicted_s / self.measured_s if self.measured_s > 0 else 1.0

    def to_json(self) -> list[dict[str, Any]]:
        return [c.to_json() for c in self.classes]


def precision_of(dtype: str | None, default: str) -> str:
    """The workload precision (fp32, bf16, fp16, fp8) of a traced op's input type; ``default`` if unknown."""
    return _PRECISION_OF_TORCH.get(units.TRACE_DTYPE_TORCH.get(dtype or "", ""), default)


def _ints(dims: Any) -> list[int] | None:
    return [int(d) for d in dims] if isinstance(dims, list) and all(isinstance(d, int) for d in dims) else None


def gemm_of(op: str, dims: list[Any]) -> Gemm | None:
    """The GEMM an aten matrix-product op computes, from its Input Dims; None for any other op or shape."""
    name = op.removeprefix("aten::")
    mats = [_ints(d) for d in dims]
    if name in ("addmm", "_addmm_activation", "baddbmm") and len(mats) >= 3:  # the added input first
        mats = mats[1:3]
    a, b = [*mats, None, None][:2]
    if a is None or b is None or not a or not b:
        return None
    if name in ("mm", "addmm", "_addmm_activation") and len(a) == 2 and len(b) == 2:
        return Gemm(a[0], b[1], a[1])
    if name in ("bmm", "baddbmm") and len(a) == 3 and len(b) == 3:
        return Gemm(a[1], b[2], a[2], a[0])
    if name == "linear" and len(b) == 2:
        return Gemm(math.prod(a[:-1]), b[0], a[-1])
    if name == "matmul" and len(b) == 2:
        return Gemm(math.prod(a[:-1]), b[1], a[-1])
    if name == "matmul" and len(a) >= 3 and a[:-2] == b[:-2]:
        return Gemm(a[-2], b[-1], a[-1], math.prod(a[:-2]))
    return None


def attention_shape(op: str, dims: list[Any]) -> tuple[int, int, int, int] | None:
    """(batch, heads, sequence, head dim) of an SDPA op's query (PyTorch's [b, h, s, d] layout); None otherwise."""
    q = _ints(dims[0]) if dims else None
    if "attention" not in op.lower() or q is None or len(q) != 4:
        return None
    return q[0], q[1], q[2], q[3]


def _ratio_gemm(x: OpShape, trace: Gpu, target: Gpu, precision: str) -> tuple[float, str] | None:
    g = gemm_of(x.op, x.dims)
    if g is None or g.flops <= 0:
        return None
    p = precision_of(x.dtype, precision)
    a, b = gemm_rate(g, trace, p), gemm_rate(g, target, p)
    return a.flops_s / b.flops_s, _sources(trace, a.source, target, b.source)


def _sources(trace: Gpu, a: str, target: Gpu, b: str) -> str:
    return a if a == b else f"{trace.name}: {a}; {target.name}: {b}"


def _ratio_attention(x: OpShape, trace: Gpu, target: Gpu, precision: str) -> tuple[float, str] | None:
    shape = attention_shape(x.op, x.dims)
    if shape is None:
        return None
    b, h, s, d = shape
    p = precision_of(x.dtype, precision)
    a, t = attention_rate(s, d, trace, p), attention_rate(s, d, target, p)
    if a is not None and t is not None:
        return a.flops_s / t.flops_s, _sources(trace, a.source, target, t.source)
    core = [Gemm(s, s, d, b * h), Gemm(s, d, s, b * h)]
    return (sum(gemm_time_s(g, target, p) for g in core) / sum(gemm_time_s(g, trace, p) for g in core),
            "the step model's attention-core GEMMs at this shape (no measured attention table for both GPUs)")


def _by_shape(cls: str, total_s: float, shapes: list[OpShape], per: int, fallback: float, fallback_source: str,
              ratio: Callable[[OpShape], tuple[float, str] | None]) -> ClassPrediction:
    """A class whose shaped ops each get their own ratio; the rest of its time the fallback ratio."""
    shaped, predicted, sources = 0.0, 0.0, list[str]()
    for x in shapes:
        r = ratio(x)
        if r is None:
            continue
        shaped += x.time_s
        predicted += x.time_s * r[0]
        if len(sources) < 2:
            sources.append(f"{x.op} {x.dims}: x{r[0]:.3g} ({r[1]})")
    rest = max(total_s - shaped, 0.0)
    note = f"{len(shapes)} shapes, {shaped / total_s:.0%} of the time by shape" if total_s > 0 else "none"
    source = "; ".join([note, *sources, f"unshaped: x{fallback:.3g} ({fallback_source})"])
    return ClassPrediction(cls, total_s / per, (predicted + rest * fallback) / per, source)


def predict(rank: TraceRank, trace: Gpu, target: Gpu, precision: str) -> ComputePrediction:
    """``rank``'s computation per step moved from GPU ``trace`` to GPU ``target`` (module docstring); ops without a
    recorded precision take the workload's ``precision``."""
    per = max(rank.window_steps, 1)
    gemm = trace.sustained(precision) / target.sustained(precision)
    elem = elementwise_bw_bytes_s(trace) / elementwise_bw_bytes_s(target)
    both_adam = trace.adam_s_per_param is not None and target.adam_s_per_param is not None
    adam = target.adam_s_per_param / trace.adam_s_per_param if both_adam else elem  # type: ignore[operator]
    big = f"large-GEMM rates, peak x GEMM fraction, {precision}"
    shapes = {c: [x for x in rank.shapes if x.cls == c] for c in ("gemm", "attention")}
    t = rank.compute_classes
    out = [
        _by_shape("gemm", t.get("gemm", 0.0), shapes["gemm"], per, gemm, big,
                  lambda x: _ratio_gemm(x, trace, target, precision)),
        _by_shape("attention", t.get("attention", 0.0), shapes["attention"], per, gemm, big,
                  lambda x: _ratio_attention(x, trace, target, precision)),
        ClassPrediction("elementwise", t.get("elementwise", 0.0) / per, t.get("elementwise", 0.0) / per * elem,
                        f"x{elem:.3g}: elementwise bandwidth {elementwise_bw_bytes_s(trace) / units.GB:.4g} -> "
                        f"{elementwise_bw_bytes_s(target) / units.GB:.4g} GB/s (catalog)"),
        ClassPrediction("optimizer", t.get("optimizer", 0.0) / per, t.get("optimizer", 0.0) / per * adam,
                        f"x{adam:.3g}: " + ("measured AdamW seconds per parameter (catalog)" if both_adam else
                                            "elementwise bandwidth (memory bound)")),
        ClassPrediction("other", t.get("other", 0.0) / per, t.get("other", 0.0) / per,
                        "kept as measured: no rate to scale by"),
    ]
    return ComputePrediction(trace.name, target.name, tuple(out))
