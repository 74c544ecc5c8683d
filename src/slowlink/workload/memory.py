"""Memory per GPU: weights, gradients, optimizer states (by ZeRO stage), activations (by recompute mode).

Mixed-precision Adam (Rajbhandari et al. 2020, ZeRO): 2 bytes of weights, 4 of fp32 main gradients (2, the
weights' dtype, when autograd accumulates them: training.grad_accumulation) and 12 of optimizer state (fp32
master, m, v) per parameter; fp32 training: 4 + 4 + 8 (the weights are the
master copy). ZeRO 1 shards the optimizer over dp, 2 also the gradients (not FSDP2's fp32 accumulator,
autograd_fp32, which is unsharded until the step's reduce-scatter), 3 also the weights.
Activations per layer and micro-batch: Korthikanti et al. 2022 Sec. 4.1, tensor by tensor (see
:func:`activation_bytes_per_layer`); for a GPT layer (ffn 4h, GeLU, MHA, dropout) their Table 2:
  no recompute, TP t:        s*b*h*(10 + 24/t + 5*a*s/(h*t))   bytes
  with sequence parallelism: s*b*h*(34/t + 5*a*s/(h*t))
  selective recompute:       drops the attention-core term (so does fused/flash attention)
  full recompute:            2*s*b*h (the layer input; /t with SP)
A 1F1B first stage holds pp micro-batches of its layers; interleaving multiplies by 1 + (pp-1)/(pp*vp).
"""

from __future__ import annotations

from dataclasses import dataclass

from slowlink import units
from slowlink.errors import InfeasiblePlan
from slowlink.workload.flops import params
from slowlink.workload.spec import DTYPE_BYTES, Workload

MAIN_GRAD_BYTES = DTYPE_BYTES["fp32"]  # Megatron's main_grad buffer (accumulate_allreduce_grads_in_fp32)
WORKSPACE_BYTES = 2.0 * units.GiB  # CUDA context, NCCL buffers, allocator fragmentation (assumption)


@dataclass(frozen=True)
class Memory:
    weights_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    workspace_bytes: float

    @property
    def total_bytes(self) -> float:
        return (self.weights_bytes + self.grads_bytes + self.optimizer_bytes + self.activations_bytes
                + self.workspace_bytes)

    def to_json(self) -> dict[str, float]:
        return {k.removesuffix("_bytes") + "_gib": v / units.GiB for k, v in self.__dict__.items()} | {
            "total_gib": self.total_bytes / units.GiB}


def kept_bytes(precision: str) -> float:
    """Bytes of one weight or activation element as the step keeps and moves it: 4 in fp32 training, else 2
    (FP8 GEMMs keep 16-bit weights and activations, as Transformer Engine does)."""
    return 4.0 if precision == "fp32" else 2.0


def optimizer_state_bytes(precision: str) -> float:
    """Bytes of Adam state per parameter: m and v in fp32 (8), plus the fp32 master copy (4) under mixed
    precision; in fp32 training the weights are the master (Rajbhandari et al. 2020, Sec. 3.1)."""
    return 8.0 if precision == "fp32" else 12.0


def params_per_gpu(w: Workload) -> float:
    """Parameters one GPU holds before ZeRO sharding: dense / (tp*pp), experts / (tp*pp*ep)."""
    dense, expert = params(w.model)
    p = w.parallel
    return dense / (p.tp * p.pp) + expert / (p.tp * p.pp * p.ep)


MASK_BYTES = 1.0  # a dropout mask element: a torch.bool (Korthikanti et al. 2022 Sec. 4.1, "1 byte")


def mlp_kept_per_token(input_width: float, ffn: float, gated: bool, tp: int, fused: bool = True) -> float:
    """Elements per token an MLP keeps for its backward (Korthikanti et al. 2022 Sec. 4.1, generalised).

    ``input_width``: its input, kept by the first GEMM (h, /t under SP; 0 where another op already keeps it).
    Then per ffn/t: non-gated, the activation's input (the first GEMM's output) and the second GEMM's input
    (GeLU at ffn 4h: Korthikanti's 8 + 8 sbh at 2 bytes); gated, the first GEMM's gate and up outputs, which
    Megatron-Core's fused SwiGLU keeps (``bias_swiglu_impl``, core/fusions/fused_bias_swiglu.py saves its
    input), and its output, the second GEMM's input. (An unfused SiLU(gate) * up, as in Meta's reference
    llama/model.py, also keeps SiLU(gate): one ffn/t more, with ``fused`` False.)
    """
    return input_width + (3.0 if gated else 2.0) * ffn / tp + (0.0 if fused or not gated else ffn / tp)


def activation_bytes_per_layer(w: Workload, recompute: str | None = None) -> float:
    """Bytes of activations one layer keeps per micro-batch: Korthikanti et al. 2022 Sec. 4.1 per tensor.

    Per token (s/cp*b of them), e bytes an element (:func:`kept_bytes`), masks :data:`MASK_BYTES`; ``/T``
    is /t under sequence parallelism (the tensors TP replicates), else 1:
      two norms' inputs             2 h e /T   (LayerNorm; an RMSNorm keeps its input too)
      QKV GEMM input                h e /T
      Q, K, V (QK^T and AV inputs)  (h + 2 h_kv) e / t   (h_kv = h kv_heads/heads; MHA: Korthikanti's 4 + 2)
      output projection input       h e / t
      MLP                           :func:`mlp_kept_per_token` (h/T, ffn, gated, fused_swiglu) x e
      dropout masks                 2 h / T after attention and MLP, if ``model.dropout``
      attention core                a s/t x (e softmax output + with dropout its mask 1 and output e)
                                    (none with flash attention or selective recompute)
    For GPT (ffn 4h, non-gated, MHA, dropout) at e = 2 this is Table 2's sbh(10 + 24/t + 5as/(ht)).
    ``recompute`` overrides the workload's mode (the compute model prices the traffic of every
    activation, kept or not, with ``"none"``).
    """
    m, p, t = w.model, w.parallel, w.training
    mode = t.recompute if recompute is None else recompute
    tokens = w.micro_batch_tokens
    e = kept_bytes(t.precision)
    split = w.sp_split
    h, h_kv = m.hidden, m.hidden * m.kv_heads / m.heads
    if mode == "full":
        return tokens * e * h / split
    per_token = e * (3.0 * h / split + (2.0 * h + 2.0 * h_kv) / p.tp
                     + mlp_kept_per_token(h / split, m.ffn_hidden, m.gated_mlp, p.tp, t.fused_swiglu))
    if m.dropout:
        per_token += MASK_BYTES * 2.0 * h / split
    if mode != "selective" and not t.flash_attention:
        per_token += m.heads * m.seq_len / p.tp * (e + (MASK_BYTES + e if m.dropout else 0.0))
    return tokens * per_token


def memory(w: Workload) -> Memory:
    """Memory of the most loaded GPU (the first pipeline stage)."""
    p, t = w.parallel, w.training
    n = params_per_gpu(w)
    shard = p.dp * p.cp
    layers = p.first_stage_layers if p.first_stage_layers is not None else w.model.layers // p.pp
    micro = t.global_batch // (t.micro_batch * p.dp)
    inflight = min(p.pp, micro) * (1.0 + (p.pp - 1) / (p.pp * p.vp) if p.vp > 1 else 1.0)
    weights = kept_bytes(t.precision)
    states = optimizer_state_bytes(t.precision)
    # fp32 main gradients, or .grad in the weights' dtype when autograd accumulates (training.grad_accumulation);
    # FSDP2's fp32 accumulator (autograd_fp32) holds the whole unsharded gradient until the reduce-scatter
    grads = weights if t.grad_accumulation == "autograd" else MAIN_GRAD_BYTES
    grad_shard = shard if p.zero >= 2 and t.grad_accumulation != "autograd_fp32" else 1
    return Memory(
        weights_bytes=weights * n / (shard if p.zero >= 3 else 1),
        grads_bytes=grads * n / grad_shard,
        optimizer_bytes=states * n / (shard if p.zero >= 1 else 1),
        activations_bytes=activation_bytes_per_layer(w) * layers * inflight,
        workspace_bytes=WORKSPACE_BYTES,
    )


def check_fits(mem: Memory, hbm_bytes: float) -> None:
    """Raise :class:`InfeasiblePlan` with the breakdown when the plan exceeds the GPU's HBM."""
    if mem.total_bytes > hbm_bytes:
        parts = ", ".join(f"{k} {v:.1f}" for k, v in mem.to_json().items() if k != "total_gib")
        raise InfeasiblePlan(
            f"memory per GPU ({mem.total_bytes / units.GiB:.1f} GiB) exceeds the GPU's HBM "
            f"({hbm_bytes / units.GiB:.1f} GiB): {parts} GiB; try more tp/pp, zero, recompute or a smaller micro_batch"
        )
