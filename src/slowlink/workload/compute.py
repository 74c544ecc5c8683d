"""Compute time of one layer for one micro-batch on one GPU: every GEMM priced by its shape and precision.

One efficiency model for every case (constants below, no per-case fitting):
  t(GEMM m x n x k, batch) = max(2*m*n*k*batch / (sustained * E_GEMM * q_wave * k_eff),  bytes / HBM bw)
    sustained = peak(precision) x the GPU's measured large-GEMM fraction (catalog: clock/power limits)
    q_wave    = useful tiles / (waves x SMs), best of the tile shapes cuBLAS picks from: the tile padding
                and the last partial wave of output tiles (wave quantisation)
    k_eff     = k / (k + K_HALF): the main loop's prologue/epilogue per output tile (short inner dims,
                e.g. the head dimension of the attention-score GEMMs, lose most); a device measured by
                `slowlink bench compute` carries its own k_half (catalog gemm_k_half); FP8 x FP8_K_HALF_RATIO
  FP8       = only the Linear GEMMs, with their quantization passes (:mod:`slowlink.workload.fp8`)
    bytes     = dtype * batch * (m*k + k*n + m*n): arithmetic intensity, the roofline's memory side
  elementwise = ELEMENTWISE_RW * activation bytes / HBM bandwidth (layer norms, dropout, GeLU, softmax:
                memory bound; their traffic scales with the activations kept, Korthikanti et al. 2022 Table 2);
                a device measured by `slowlink bench compute` divides by its measured elementwise rate
Forward GEMMs per GPU, T = b*s/cp tokens: QKV (T, (h+2h_kv)/tp, h), output (T, h, h/tp) (MLA: its five matrices,
Model.attention_matrices), MLP in (T, f*(2 if gated else 1)/tp, h), MLP out (T, h, f/tp); attention scores (s/cp, s,
d) and context (s/cp, d, s), batched over b*heads/tp (unfused, Megatron 2021/2022). Backward: the data-gradient (m, k,
n) and the weight-gradient (k, n, m) GEMM of each forward GEMM; attention core and elementwise twice forward.
Fused (flash) attention: the attention core costs FLASH_CAUSAL of it (causal blocks skipped), 2.5x forward
backward (scores recomputed), and no softmax/dropout traffic (Dao et al. 2022).
Recomputation adds the forward terms (full) or the attention core with its softmax/dropout traffic
(selective, the 5*a*s/h term of Korthikanti et al. 2022). With fused attention selective recompute saves no
memory but still costs the core's forward: Megatron-Core checkpoints the core attention whatever its backend
(core_r0.10.0 megatron/core/transformer/attention.py: ``checkpoint_core_attention`` is set by
recompute_granularity 'selective' alone, and ``_checkpointed_attention_forward`` wraps ``self.core_attention``,
TE's fused or flash kernel included); legacy Megatron-LM (megatron/model/transformer.py) skipped it under
--use-flash-attn, a stack this model does not distinguish.
Gradient accumulation (training.grad_accumulation autograd): each backward also adds the micro-batch's weight
gradients into .grad, GRAD_ACCUMULATE_RW x the local weight bytes; autograd_fp32: into an fp32 buffer, the new
gradient read in the weights' dtype and the fp32 sum read and written (:func:`grad_accumulation_s`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from slowlink.catalog import Gpu
from slowlink.spec.workload import Workload
from slowlink.units import PRECISION_BYTES
from slowlink.workload.fp8 import linear_precision, other_precision, quantize_bytes
from slowlink.workload.loss import cross_entropy_bytes
from slowlink.workload.memory import (
    MAIN_GRAD_BYTES,
    activation_bytes_per_layer,
    kept_bytes,
    layer_params_per_gpu,
    main_grad_bytes,
    vocab_shard_params,
)
from slowlink.workload.moe import (
    dispatch_bytes,
    expert_activation_bytes,
    expert_load,
    local_tokens,
    router_kernels_s,
)
from slowlink.workload.sac import block_matmuls

# Share of the sustained GEMM rate inside a training layer (epilogues, launch gaps), set on the calibration set
# only (all A100): it fixed gemm_fraction x E_GEMM at 0.783 for the A100; with the A100's measured MAMF share
# 0.859 (catalog) that is 0.912.
E_GEMM = 0.912
K_HALF = 200.0  # inner dimension at which a tile's main loop reaches half its rate
# FP8 GEMMs reach half their rate at a longer inner dimension: rate(K) = R K / (K + k_half) fitted to tilelang's
# K sweeps at M = N = 8192 on H800 SXM (shared/calibration/kernels.yaml tilelang_fp8_gemm_8192_h800 and
# tilelang_fp16_gemm_8192_h800, 7 points each, residuals under 2%): k_half 440 for FP8, 258 for FP16, same kernel
# generator and shape; their ratio scales K_HALF (or a device's measured k_half) for FP8.
FP8_K_HALF_RATIO = 440.5 / 258.5
ELEMENTWISE_RW = 2.0  # bytes moved per activation byte kept: written once by its kernel, read once by the next
FLASH_CAUSAL = 0.5  # share of the s x s score blocks a causal fused kernel computes
TILES = ((256, 128), (128, 256), (128, 128))  # output tile shapes (m, n) of cuBLAS/CUTLASS kernels
# PyTorch's AccumulateGrad, when .grad already holds a tensor, adds the new gradient in place
# (torch/csrc/autograd/functions/accumulate_grad.h, accumulateGrad: ``variable_grad += new_grad``): the old
# gradient read, the new one read, the sum written, each in the weights' dtype
GRAD_ACCUMULATE_RW = 3.0


@dataclass(frozen=True)
class Gemm:
    """One (batched) GEMM: C[m, n] = A[m, k] @ B[k, n], ``batch`` times."""

    m: float
    n: float
    k: float
    batch: float = 1.0

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k * self.batch

    def backward(self) -> tuple[Gemm, Gemm]:
        """Data gradient dA = dC @ B^T (m, k, n) and weight gradient dB = A^T @ dC (k, n, m)."""
        return Gemm(self.m, self.k, self.n, self.batch), Gemm(self.k, self.n, self.m, self.batch)


@dataclass(frozen=True)
class StageCompute:
    """Seconds of compute for one micro-batch through one layer (forward, backward incl. recompute)."""

    forward_s: float
    backward_s: float
    attn_core_s: float = 0.0

    @property
    def total_s(self) -> float:
        return self.forward_s + self.backward_s


def wave_quantisation(g: Gemm, sms: int) -> float:
    """Useful output tiles over launched tile slots (waves x SMs), best tile shape."""
    best = 0.0
    for tm, tn in TILES:
        tiles = g.batch * math.ceil(g.m / tm) * math.ceil(g.n / tn)
        waves = math.ceil(tiles / sms)
        best = max(best, g.batch * g.m * g.n / (tm * tn) / (waves * sms))
    return best


def gemm_time_s(g: Gemm, gpu: Gpu, precision: str) -> float:
    """Seconds of one GEMM on ``gpu`` (see the module docstring)."""
    if g.flops <= 0:
        return 0.0
    k_half = K_HALF if gpu.gemm_k_half is None else gpu.gemm_k_half
    k_half *= FP8_K_HALF_RATIO if precision == "fp8" else 1.0
    rate = gpu.sustained(precision) * E_GEMM * wave_quantisation(g, gpu.sms) * g.k / (g.k + k_half)
    dtype = PRECISION_BYTES[precision]
    mem = dtype * g.batch * (g.m * g.k + g.k * g.n + g.m * g.n) / gpu.hbm_bw_bytes_s
    return max(g.flops / rate, mem)


def layer_gemms(w: Workload) -> list[Gemm]:
    """Forward weight GEMMs of one layer on one GPU (MoE experts included): the Linear GEMMs
    (:func:`linear_gemms`) with the router's gating GEMM after the attention's."""
    router = router_gemm(w)
    lin = linear_gemms(w)
    if router is None:
        return lin
    attn = len(w.model.attention_matrices())
    return [*lin[:attn], router, *lin[attn:]]


def router_gemm(w: Workload) -> Gemm | None:
    """The MoE router's gating GEMM on the GPU's own n tokens (the SP slice; core_r0.10.0 router.py gating);
    None for a dense model."""
    e = w.model.moe
    return None if e is None else Gemm(local_tokens(w), e.experts, w.model.hidden)


def linear_gemms(w: Workload) -> list[Gemm]:
    """Forward GEMMs of one layer's Linear modules on one GPU: the attention's matrices, the MLP or the local experts
    (and shared experts); the ones an FP8 recipe quantizes (:mod:`slowlink.workload.fp8`)."""
    m, p = w.model, w.parallel
    tokens = w.micro_batch_tokens
    h, tp = m.hidden, p.tp
    mats = 2 if m.gated_mlp else 1
    # attention: column-parallel matrices split their output over TP, the row-parallel output projection its
    # input; MLA's down-projections are replicated (Model.attention_matrices)
    *cols, (o_out, o_in, _) = m.attention_matrices()
    out = [*(Gemm(tokens, o / tp if split else o, i) for o, i, split in cols), Gemm(tokens, o_out, o_in / tp)]
    if m.moe is None:
        return [*out, Gemm(tokens, mats * m.ffn_hidden / tp, h), Gemm(tokens, h, m.ffn_hidden / tp)]
    e = m.moe
    local = e.experts // p.ep
    per_expert = tokens * e.top_k * p.ep / e.experts * expert_load(w)  # the most loaded rank's experts
    # Megatron-Core's SequentialMLP (moe_grouped_gemm off) launches each local expert's GEMMs on its own
    # (core_r0.10.0 experts.py); a grouped GEMM would be one launch, which this model does not distinguish.
    out += [Gemm(per_expert, mats * e.expert_ffn_hidden / tp, h), Gemm(per_expert, h, e.expert_ffn_hidden / tp)] * local
    if e.shared_experts:
        f = e.expert_ffn_hidden * e.shared_experts
        out += [Gemm(tokens, mats * f / tp, h), Gemm(tokens, h, f / tp)]
    return out


def attention_gemms(w: Workload) -> list[Gemm]:
    """Forward attention-core GEMMs (scores and context), batched over micro-batch x local heads."""
    m, p, t = w.model, w.parallel, w.training
    batch = t.micro_batch * m.heads / p.tp
    q = m.seq_len / p.cp
    return [Gemm(q, m.seq_len, m.qk_head_dim, batch), Gemm(q, m.v_head_dim, m.seq_len, batch)]


def elementwise_bw_bytes_s(gpu: Gpu) -> float:
    """Bytes/s of memory-bound kernels: the device's measured elementwise rate, else its HBM bandwidth."""
    return gpu.hbm_bw_bytes_s if gpu.elementwise_bw is None else gpu.elementwise_bw


def added_grad_bytes_per_param(w: Workload) -> float:
    """HBM bytes of adding one weight's new gradient into its accumulator outside the GEMM, per micro-batch:
      autograd       3 e: AccumulateGrad's ``variable_grad += new_grad`` in the weights' dtype e
      fused          e + 2 g: the new gradient read, the main gradient (g bytes: the stack's buffer,
                     :func:`~slowlink.workload.memory.main_grad_bytes`, Megatron-Core's in the dtype it reduces in)
                     read and written: Megatron's DDP hook adding ``param.grad`` into ``main_grad`` (a gradient no
                     GEMM accumulated, e.g. the embedding's, :mod:`slowlink.workload.embedding`)
      autograd_fp32  e + 2 x 4: the same into PyTorch FSDP2's fp32 accumulator (
                     torch/distributed/_composable/fsdp/_fsdp_param.py, accumulate_unsharded_grad_if_needed:
                     ``self.unsharded_accumulated_grad += self.unsharded_param.grad`` when reduce_dtype is fp32
                     and gradient sync is off; Llama 3 accumulates in fp32 over micro-batches, Dubey et al.
                     2024, Sec. 3.3.2, numerical stability)."""
    e = kept_bytes(w.training.precision)
    if w.training.grad_accumulation == "autograd":
        return GRAD_ACCUMULATE_RW * e
    return e + 2.0 * (MAIN_GRAD_BYTES if w.training.grad_accumulation == "autograd_fp32" else main_grad_bytes(w))


def grad_accumulation_bytes_per_param(w: Workload) -> float:
    """HBM bytes one weight's gradient accumulation moves per micro-batch (training.grad_accumulation): none when
    fused (the weight-gradient GEMM accumulates: Megatron's gradient_accumulation_fusion), else
    :func:`added_grad_bytes_per_param`."""
    return 0.0 if w.training.grad_accumulation == "fused" else added_grad_bytes_per_param(w)


def grad_accumulation_s(w: Workload, local_params: float, gpu: Gpu) -> float:
    """Seconds of one micro-batch's weight-gradient accumulation over ``local_params`` weights
    (:func:`grad_accumulation_bytes_per_param`). Every micro-batch is charged; the step's first assigns (autograd)
    or upcasts (autograd_fp32) instead: at most 1/m of this term too much."""
    return grad_accumulation_bytes_per_param(w) * local_params / elementwise_bw_bytes_s(gpu)


@dataclass(frozen=True)
class LayerParts:
    """Seconds of one layer for one micro-batch on one GPU, by kind of kernel (module docstring); forward and
    backward add up to :func:`layer_compute` (``forward_s``, ``backward_s``)."""

    gemm_fwd_s: float       # weight GEMMs (QKV, output, MLP, router and experts)
    gemm_bwd_s: float       # their data- and weight-gradient GEMMs
    attn_fwd_s: float       # attention core: score and context GEMMs, or the fused kernel's share
    attn_bwd_s: float       # its backward (2x, fused 2.5x: scores recomputed)
    elementwise_fwd_s: float  # memory-bound kernels over the kept activations (norms, GeLU, softmax, dropout)
    elementwise_bwd_s: float  # the same twice in backward
    moe_fwd_s: float        # MoE token dispatch traffic and router kernels, forward
    moe_bwd_s: float        # and backward
    recompute_s: float      # activation recomputation in backward (training.recompute)
    accumulate_s: float     # weight-gradient accumulation outside the GEMM (training.grad_accumulation)
    quantize_fwd_s: float = 0.0  # FP8 quantization of the Linear inputs and weights (slowlink.workload.fp8)
    quantize_bwd_s: float = 0.0  # and of their output gradients

    @property
    def forward_s(self) -> float:
        return self.gemm_fwd_s + self.attn_fwd_s + self.elementwise_fwd_s + self.moe_fwd_s + self.quantize_fwd_s

    @property
    def backward_s(self) -> float:
        return (self.gemm_bwd_s + self.attn_bwd_s + self.elementwise_bwd_s + self.moe_bwd_s + self.recompute_s
                + self.accumulate_s + self.quantize_bwd_s)


def layer_parts(w: Workload, gpu: Gpu) -> LayerParts:
    """Forward and backward seconds of one layer for one micro-batch on one GPU by kind (see module docstring)."""
    prec, other = linear_precision(w), other_precision(w)  # under FP8 only the Linear GEMMs run in FP8
    lin, router = linear_gemms(w), router_gemm(w)
    routed = [] if router is None else [router]
    fwd_gemm = sum(gemm_time_s(g, gpu, prec) for g in lin) + sum(gemm_time_s(g, gpu, other) for g in routed)
    bwd_gemm = (sum(gemm_time_s(x, gpu, prec) for g in lin for x in g.backward())
                + sum(gemm_time_s(x, gpu, other) for g in routed for x in g.backward()))
    core = sum(gemm_time_s(g, gpu, other) for g in attention_gemms(w))
    bw = elementwise_bw_bytes_s(gpu)
    quant = [quantize_bytes(w, g.m, g.n, g.k) for g in lin] if prec == "fp8" else []
    q_fwd, q_bwd = sum(f for f, _ in quant) / bw, sum(b for _, b in quant) / bw
    kept = activation_bytes_per_layer(w, recompute="none")
    elem = ELEMENTWISE_RW * (kept + expert_activation_bytes(w)) / bw
    # the attention core's share (softmax, its dropout): what selective recompute does not keep
    elem_attn = ELEMENTWISE_RW * (kept - activation_bytes_per_layer(w, recompute="selective")) / bw
    flash = w.training.flash_attention
    if flash:  # causal blocks skipped; scores stay on chip; backward recomputes them (2.5x forward)
        core, elem, elem_attn = FLASH_CAUSAL * core, elem - elem_attn, 0.0
    moe_fwd, moe_bwd = (x / bw for x in dispatch_bytes(w))
    router_fwd, router_bwd = router_kernels_s(w)
    moe_fwd, moe_bwd = moe_fwd + router_fwd, moe_bwd + router_bwd
    fwd = fwd_gemm + core + elem + moe_fwd + q_fwd
    extra = ({"none": 0.0, "selective": core + elem_attn, "full": fwd}[w.training.recompute]
             if w.training.recompute != "op_selective" else op_sac_recompute_s(w, gpu, elem))
    return LayerParts(gemm_fwd_s=fwd_gemm, gemm_bwd_s=bwd_gemm, attn_fwd_s=core,
                      attn_bwd_s=(2.5 if flash else 2.0) * core, elementwise_fwd_s=elem, elementwise_bwd_s=2.0 * elem,
                      moe_fwd_s=moe_fwd, moe_bwd_s=moe_bwd, recompute_s=extra,
                      accumulate_s=grad_accumulation_s(w, layer_params_per_gpu(w), gpu), quantize_fwd_s=q_fwd,
                      quantize_bwd_s=q_bwd)


def op_sac_recompute_s(w: Workload, gpu: Gpu, elementwise_s: float) -> float:
    """Seconds op-level selective checkpointing runs again in a layer's backward (:mod:`slowlink.workload.sac`):
    the unsaved matrix multiplies at their per-GPU shapes and every elementwise kernel of the forward
    (``elementwise_s``); the attention core and the saved outputs are not recomputed."""
    tokens, tp = w.micro_batch_tokens, w.parallel.tp
    prec = linear_precision(w)
    gemms = [Gemm(tokens, mm.out / tp, mm.inp) if mm.column else Gemm(tokens, mm.out, mm.inp / tp)
             for mm in block_matmuls(w.model) if not mm.saved]
    return sum(gemm_time_s(g, gpu, prec) for g in gemms) + elementwise_s


def layer_compute(w: Workload, gpu: Gpu) -> StageCompute:
    """Forward and backward seconds of one layer for one micro-batch on one GPU: :func:`layer_parts` summed."""
    parts = layer_parts(w, gpu)
    return StageCompute(forward_s=parts.forward_s, backward_s=parts.backward_s, attn_core_s=parts.attn_fwd_s)


def output_gemm(w: Workload) -> Gemm:
    """The output layer's forward GEMM for one micro-batch on one GPU, [tokens, h] x [h, V/tp]; its data- and
    weight-gradient GEMMs are :meth:`Gemm.backward`."""
    return Gemm(w.micro_batch_tokens, w.model.vocab / w.parallel.tp, w.model.hidden)


@dataclass(frozen=True)
class LogitsParts:
    """Seconds of the output projection and loss for one micro-batch, by kind (:func:`logits_parts`)."""

    gemm_s: float           # the projection's forward, data- and weight-gradient GEMMs
    cross_entropy_s: float  # vocab-parallel cross-entropy, forward and backward (memory bound)
    accumulate_s: float     # the projection's weight-gradient accumulation outside the GEMM
    gemm_forward_s: float   # of gemm_s, the forward GEMM

    @property
    def total_s(self) -> float:
        return self.gemm_s + self.cross_entropy_s + self.accumulate_s

    @property
    def forward_s(self) -> float:
        """The forward GEMM and half the loss's passes."""
        return self.gemm_forward_s + self.cross_entropy_s / 2.0


def logits_parts(w: Workload, gpu: Gpu) -> LogitsParts:
    """Forward + backward seconds of the output projection and its vocab-parallel cross-entropy
    (:func:`~slowlink.workload.loss.cross_entropy_bytes`) for one micro-batch (on the last stage), by kind."""
    g, prec = output_gemm(w), other_precision(w)  # the output layer is no TE module: BF16 under FP8
    forward = gemm_time_s(g, gpu, prec)
    return LogitsParts(gemm_s=forward + sum(gemm_time_s(x, gpu, prec) for x in g.backward()),
                       cross_entropy_s=cross_entropy_bytes(w) / elementwise_bw_bytes_s(gpu),
                       accumulate_s=grad_accumulation_s(w, vocab_shard_params(w), gpu), gemm_forward_s=forward)


def logits_compute_s(w: Workload, gpu: Gpu) -> float:
    """Forward + backward seconds of the output projection and its loss for one micro-batch: :func:`logits_parts`
    summed."""
    return logits_parts(w, gpu).total_s
