"""Compute time of one micro-batch on one pipeline stage, from the GPU's peak and one efficiency model.

Achievable-efficiency model (one set of constants for every case, no per-case fitting):
  GEMM time      = F_gemm / (peak(precision) * E_MAX[precision] * F_g / (F_g + F_HALF))
                   where F_g is the FLOPs of one per-GPU GEMM (the QKV projection: 2 * T * h * 3h/tp),
                   a saturating curve: small GEMMs lose to launch and wave-quantisation tails;
  attention core = F_core / (peak * E_MAX * E_ATTN)  (softmax-bound batched GEMMs);
  elementwise    = ELEMENTWISE_RW * activation bytes / HBM bandwidth (layer norms, dropout, GeLU,
                   softmax are memory bound; their traffic scales with the activations they write,
                   Korthikanti et al. 2022 Table 2).
Backward costs twice the forward for every term; recomputation adds forward terms.
"""

from __future__ import annotations

from dataclasses import dataclass

from slowlink.catalog import Gpu
from slowlink.workload.flops import layer_forward, logits_forward
from slowlink.workload.memory import activation_bytes_per_layer
from slowlink.workload.spec import Workload

E_MAX = {"fp16": 0.72, "bf16": 0.72, "fp8": 0.55}  # share of peak large GEMMs reach (cuBLAS, A100/H100)
F_HALF = 2.0e9  # FLOPs of a GEMM that reaches half of E_MAX
E_ATTN = 0.6  # attention-core GEMMs relative to plain GEMMs
ELEMENTWISE_RW = 2.0  # bytes moved per activation byte kept (one write, one read)


@dataclass(frozen=True)
class StageCompute:
    """Seconds of compute for one micro-batch through one layer (forward, backward incl. recompute)."""

    forward_s: float
    backward_s: float

    @property
    def total_s(self) -> float:
        return self.forward_s + self.backward_s


def gemm_efficiency(w: Workload, gpu_precision: str) -> float:
    """E_MAX * F_g / (F_g + F_HALF) for the QKV GEMM of one micro-batch on one GPU."""
    m, p, t = w.model, w.parallel, w.training
    tokens = t.micro_batch * m.seq_len / p.cp
    f_g = 2.0 * tokens * m.hidden * 3 * m.hidden / p.tp
    return E_MAX[gpu_precision] * f_g / (f_g + F_HALF)


def layer_compute(w: Workload, gpu: Gpu) -> StageCompute:
    """Forward and backward seconds of one layer for one micro-batch on one GPU (see module docstring)."""
    t, p = w.training, w.parallel
    lf = layer_forward(w.model, t.micro_batch)
    split = p.tp * p.cp
    peak = gpu.peak(t.precision)
    eff = gemm_efficiency(w, t.precision)
    gemm_s = lf.gemm / split / (peak * eff)
    core_s = lf.attn_core / split / (peak * E_MAX[t.precision] * E_ATTN)
    elem_s = ELEMENTWISE_RW * activation_bytes_per_layer(_no_recompute(w)) / gpu.hbm_bw_bytes_s
    fwd = gemm_s + core_s + elem_s
    extra = {"none": 0.0, "selective": core_s, "full": fwd}[t.recompute]
    return StageCompute(forward_s=fwd, backward_s=2.0 * fwd + extra)


def logits_compute_s(w: Workload, gpu: Gpu) -> float:
    """Forward + backward seconds of the output projection for one micro-batch (on the last stage)."""
    t, p = w.training, w.parallel
    f = 3.0 * logits_forward(w.model, t.micro_batch) / (p.tp * p.cp)
    return f / (gpu.peak(t.precision) * gemm_efficiency(w, t.precision))


def _no_recompute(w: Workload) -> Workload:
    from dataclasses import replace

    return replace(w, training=w.training.model_copy(update={"recompute": "none"}))
