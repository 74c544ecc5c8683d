"""Memory per GPU: weights, gradients, optimizer states (by ZeRO stage), activations (by recompute mode), logits.

Mixed-precision Adam (Rajbhandari et al. 2020, ZeRO): 2 bytes of weights, the gradient buffer (:func:`grad_bytes`:
the stack's, e.g. Megatron-Core's main_grad in the dtype it reduces in, 2 bytes unless grad_comm_dtype is fp32) and
12 of optimizer state (fp32 master, m, v: :func:`optimizer_state_bytes`, the stack's dtypes) per parameter; fp32
training: 4 + 4 + 8 (the weights are the master copy). ZeRO 1 shards the optimizer over dp, 2 also the gradients
(not FSDP2's fp32 accumulator, autograd_fp32, which is unsharded until the step's reduce-scatter), 3 also the weights.
Activations per layer and micro-batch: Korthikanti et al. 2022 Sec. 4.1, tensor by tensor (see
:func:`activation_bytes_per_layer`); for a GPT layer (ffn 4h, GeLU, MHA, dropout) their Table 2:
  no recompute, TP t:        s*b*h*(10 + 24/t + 5*a*s/(h*t))   bytes
  with sequence parallelism: s*b*h*(34/t + 5*a*s/(h*t))
  selective recompute:       drops the attention-core term (so does fused/flash attention)
  full recompute:            2*s*b*h (the layer input; /t with SP)
Each pipeline rank holds the activations of the chunk forwards whose backward has not run (Megatron-Core's order:
the first rank pp micro-batches of its layers in 1F1B, pp + (pp-1)/vp stages' worth interleaved), its stage's
weights and states, and the ends: the input embedding on the first rank, the output layer and one micro-batch's
logits and loss buffers on the last; the plan reports the most loaded rank (:func:`memory`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from slowlink import units
from slowlink.catalog.stack import Stack
from slowlink.catalog.stack import stack as default_stack
from slowlink.errors import InfeasiblePlan
from slowlink.spec.workload import Workload
from slowlink.workload import sac
from slowlink.workload.flops import params
from slowlink.workload.schedule import peak_in_flight, rank_layers, stage_layers

Stage = Literal["only", "first", "middle", "last"]  # "only": pp 1, one rank holds the whole model
MAIN_GRAD_BYTES = units.PRECISION_BYTES["fp32"]  # an fp32 gradient accumulator (FSDP2's, an fp32 main_grad)
WORKSPACE_BYTES = 2.0 * units.GiB  # CUDA context, NCCL buffers, allocator fragmentation (assumption)
# What PyTorch's caching allocator held but could not use, on average over eight LLM trainings on A100-80GB:
# 9.2 GB (up to 25 GB; GMLake, Guo et al., ASPLOS 2024, arXiv 2401.08156). A plan with less free than this is
# told so: the model counts only WORKSPACE_BYTES for it.
FRAGMENTATION_BYTES = 9.2e9


@dataclass(frozen=True)
class Memory:
    weights_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    logits_bytes: float
    workspace_bytes: float
    stage: Stage  # which pipeline rank it is

    @property
    def parts(self) -> dict[str, float]:
        """Bytes by part, in the order a breakdown lists them."""
        return {k.removesuffix("_bytes"): v for k, v in self.__dict__.items() if k.endswith("_bytes")}

    @property
    def total_bytes(self) -> float:
        return sum(self.parts.values())

    def breakdown(self) -> str:
        """The parts in words: 'weights 7.5, grads 15.0, ... GiB'."""
        return ", ".join(f"{k} {v / units.GiB:.1f}" for k, v in self.parts.items()) + " GiB"

    def sentence(self, hbm_bytes: float) -> str:
        """How full the most loaded GPU is, where it sits in the pipeline and what fills it."""
        where = "" if self.stage == "only" else f", on the {self.stage} pipeline stage (the most loaded)"
        text = (f"memory per GPU {self.total_bytes / units.GiB:.1f} of {hbm_bytes / units.GiB:.1f} GiB "
                f"({self.total_bytes / hbm_bytes:.0%}){where}: {self.breakdown()}")
        free = hbm_bytes - self.total_bytes
        if free < FRAGMENTATION_BYTES:
            text += (f"; only {free / units.GiB:.1f} GiB free: PyTorch's caching allocator alone held "
                     f"{FRAGMENTATION_BYTES / units.GB:.1f} GB it could not use on average in LLM training (GMLake, "
                     "ASPLOS 2024), and NCCL's buffers (NCCL_BUFFSIZE per channel and peer) come on top of the "
                     f"{WORKSPACE_BYTES / units.GiB:.0f} GiB workspace counted here: expect an out-of-memory error "
                     "unless PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True or a smaller micro-batch leaves room")
        return text

    def to_json(self) -> dict[str, float | str]:
        out: dict[str, float | str] = {f"{k}_gib": v / units.GiB for k, v in self.parts.items()}
        return out | {"total_gib": self.total_bytes / units.GiB, "stage": self.stage}


def kept_bytes(precision: str) -> float:
    """Bytes of one weight or activation element as the step keeps and moves it: 4 in fp32 training, else 2
    (FP8 GEMMs keep 16-bit weights and activations, as Transformer Engine does)."""
    return units.PRECISION_BYTES["fp32" if precision == "fp32" else "bf16"]


def weight_bytes(w: Workload, gathered: bool = False) -> float:
    """Bytes per element of the transformer block's weights as a GPU keeps them (``gathered`` False) or as ZeRO
    all-gathers them: FP8 (1) with training.fp8_param_gather where the stack does so (its ``fp8_param_gather``:
    fp8_params keeps and gathers the Linear weights in FP8, Megatron-Core's --fp8-param-gather; fsdp_all_gather
    only gathers them in FP8, torchtitan's enable_fsdp_float8_all_gather), else :func:`kept_bytes`. The block's
    norm weights are counted with the Linear weights (4h of some 12h^2 per layer)."""
    kind = w.stack.fields.fp8_param_gather if w.training.fp8_param_gather else "none"
    if kind == "fp8_params" or (kind == "fsdp_all_gather" and gathered):
        return units.PRECISION_BYTES["fp8"]
    return kept_bytes(w.training.precision)


def gathered_bytes_per_param(w: Workload) -> float:
    """Bytes per parameter of a GPU's ZeRO parameter all-gathers, on average over its parameters
    (:func:`params_per_gpu`): the layers' at :func:`weight_bytes` (gathered), the vocabulary matrices' (the embedding
    and the output layer, never FP8 Linear layers) at :func:`kept_bytes`."""
    p = w.parallel
    layers = stage_params(w, w.model.layers / p.pp, 0.0)
    ends = stage_params(w, 0.0, 2.0 / p.pp)
    return (layers * weight_bytes(w, gathered=True) + ends * kept_bytes(w.training.precision)) / (layers + ends)


def optimizer_state_bytes(precision: str, st: Stack | None = None) -> float:
    """Bytes of Adam state per parameter: m and v in the stack's ``optimizer_moment_dtype`` (fp32: 8), plus its fp32
    master copy (4, ``master_weights``) under mixed precision; in fp32 training the weights are the master
    (Rajbhandari et al. 2020, Sec. 3.1). ``st`` None: the default stack (12 bytes mixed, 8 in fp32)."""
    f = (st or default_stack()).fields
    master = f.master_weights and precision != "fp32"
    return units.PRECISION_BYTES["fp32"] * master + 2.0 * units.PRECISION_BYTES[f.optimizer_moment_dtype]


def main_grad_bytes(w: Workload) -> float:
    """Bytes per parameter of the buffer fused weight-gradient accumulation writes (the stack's
    ``grad_buffer_dtype``): fp32, or the dtype the DP reduction runs in: 4 with grad_comm_dtype fp32, else the
    weights' (:func:`kept_bytes`; Megatron-Core's grad_dtype = torch.float if grad_reduce_in_fp32 else
    param.dtype, distributed_data_parallel.py)."""
    t = w.training
    if w.stack.fields.grad_buffer_dtype == "fp32" or t.grad_comm_dtype == "fp32":
        return MAIN_GRAD_BYTES
    return kept_bytes(t.precision)


def grad_bytes(w: Workload) -> float:
    """Bytes per parameter of the gradients a GPU holds (training.grad_accumulation): .grad in the weights' dtype
    when autograd accumulates, FSDP2's fp32 accumulator (autograd_fp32), else :func:`main_grad_bytes`."""
    acc = w.training.grad_accumulation
    if acc == "autograd":
        return kept_bytes(w.training.precision)
    return MAIN_GRAD_BYTES if acc == "autograd_fp32" else main_grad_bytes(w)


def layer_params_split(w: Workload) -> tuple[float, float]:
    """(dense, expert) weights of one layer on one GPU: dense matrices and norms / tp, experts / (tp x ep)."""
    m, p = w.model, w.parallel
    dense, expert = params(m)
    return (dense - 2.0 * m.vocab * m.hidden) / p.tp / m.layers, expert / (p.tp * p.ep) / m.layers


def layer_params_per_gpu(w: Workload) -> float:
    """Weights of one layer on one GPU, dense and expert (:func:`layer_params_split`)."""
    return sum(layer_params_split(w))


def vocab_shard_params(w: Workload) -> float:
    """Weights of one GPU's slice of a vocabulary matrix, the word embedding or the output layer: V/tp x h."""
    return w.model.vocab / w.parallel.tp * w.model.hidden


def params_per_gpu(w: Workload) -> float:
    """Parameters one GPU holds before ZeRO sharding, on average over the pipeline stages: dense / (tp*pp),
    experts / (tp*pp*ep) (:func:`stage_params` of layers / pp and 2 / pp ends)."""
    return stage_params(w, w.model.layers / w.parallel.pp, 2.0 / w.parallel.pp)


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
      Q, K, V (QK^T and AV inputs)  (h + 2 h_kv) e / t   (h_kv = h kv_heads/heads; MHA: Korthikanti's 4 + 2;
                                    MLA: a (2 d_qk + d_v), the per-head tensors decompressed from the latents)
      output projection input       h e / t              (MLA a d_v)
      MLA latents                   (q_lora + kv_lora) e, the up-projections' inputs (replicated over TP)
      MLP                           :func:`mlp_kept_per_token` (h/T, ffn, gated, fused_swiglu) x e
      dropout masks                 2 h / T after attention and MLP, if ``model.dropout``
      attention core                a s/t x (e softmax output + with dropout its mask 1 and output e)
                                    (none with flash attention or selective recompute)
    For GPT (ffn 4h, non-gated, MHA, dropout) at e = 2 this is Table 2's sbh(10 + 24/t + 5as/(ht)).
    ``recompute`` overrides the workload's mode (the compute model prices the traffic of every
    activation, kept or not, with ``"none"``); op_selective keeps what :mod:`slowlink.workload.sac` says.
    """
    m, p, t = w.model, w.parallel, w.training
    mode = t.recompute if recompute is None else recompute
    tokens = w.micro_batch_tokens
    e = kept_bytes(t.precision)
    split = w.sp_split
    h = m.hidden
    if mode == "full":
        return tokens * e * h / split
    if mode == "op_selective":
        return tokens * sac.saved_bytes_per_token(m, p.tp, split, e)
    qkv_out = m.heads * m.qk_head_dim + m.k_width + m.v_width + m.attn_out_width
    latents = 0.0 if m.mla is None else float(m.mla.q_lora_rank + m.mla.kv_lora_rank)
    per_token = e * (3.0 * h / split + qkv_out / p.tp + latents
                     + mlp_kept_per_token(h / split, m.ffn_hidden, m.gated_mlp, p.tp, t.fused_swiglu))
    if m.dropout:
        per_token += MASK_BYTES * 2.0 * h / split
    if mode != "selective" and not t.flash_attention:
        per_token += m.heads * m.seq_len / p.tp * (e + (MASK_BYTES + e if m.dropout else 0.0))
    return tokens * per_token


# fp32 buffers of one logit alive at once in the backward of PyTorch's cross_entropy over fp32 logits: the
# log-softmax output (saved), nll_loss's gradient and log_softmax's input gradient (aten nll_loss_backward,
# _log_softmax_backward_data)
LOSS_BACKWARD_FP32 = 3.0


def logits_bytes(w: Workload) -> float:
    """Bytes the logits and the loss hold at their peak, one micro-batch on the last pipeline stage.

    N = b*s/cp x V/tp logits of e bytes (:func:`kept_bytes`) out of the output layer; ``training.cross_entropy``
    (the ops as :mod:`slowlink.workload.loss` reads them from the same code):
      megatron, megatron_fused  e + 4 per logit: Megatron-Core (core_r0.10.0 tensor_parallel/cross_entropy.py,
                      ``calculate_logits_max``; fusions/fused_cross_entropy.py alike) copies the logits to fp32
                      with ``.float()`` while the caller (``GPTModel.forward``) still holds them, then works in
                      place on that copy and saves it for the backward, whose fp32 gradient, also in place, is
                      cast back to e bytes beside it; fp32 training: 4 (``.float()`` returns the same tensor)
      fused           e: the logits alone, the loss and its gradient written in place (flash-attn's
                      cross_entropy with inplace_backward, :data:`~slowlink.workload.loss.FUSED_CE_PASSES`)
      gathered        2 e + :data:`LOSS_BACKWARD_FP32` x 4 per logit of the whole vocabulary (N x tp, every TP
                      rank): in the loss's backward PyTorch's ``nll_loss`` gradient (zero-filled), the log-softmax
                      output its forward saved and ``log_softmax``'s input gradient, all fp32; beside them the
                      gathered logits of this micro-batch and of the one before, which stay in the pipeline's
                      stage-output buffers (Aleph Alpha's scaling, core/nn/parallel_module/parallel_module.py
                      ``_execute_loss_fn`` reads the output with ``get``, not ``take``; pipeline_schedule/train.py
                      ``required_buffer_count``: at least two buffers, reused every other micro-batch). Its forward
                      holds less (2 e + the fp32 cast + the log-softmax output)
    Measured with PyTorch 2.13 on this machine's CPU (``benchmarks/loss_memory.py``, peak resident bytes, 2048 x
    32768 bf16 logits): megatron 6.14 bytes per logit (modelled 6), gathered 16.08 (modelled 16).
    """
    m, p, t = w.model, w.parallel, w.training
    n = w.micro_batch_tokens * m.vocab / p.tp
    e = kept_bytes(t.precision)
    f32 = units.PRECISION_BYTES["fp32"]
    if t.cross_entropy == "gathered":
        return n * p.tp * (2.0 * e + LOSS_BACKWARD_FP32 * f32)
    if t.cross_entropy == "fused":
        return n * e
    return n * (f32 if e == f32 else e + f32)


def stage_params(w: Workload, layers: float, ends: float) -> float:
    """Parameters a GPU of a pipeline stage holds before ZeRO sharding: its ``layers`` (dense / tp, experts /
    (tp*ep)) and ``ends`` V x h / tp matrices (the input embedding on the first stage, the output layer on the last:
    Megatron keeps a copy of a tied embedding there when pp > 1). Over all stages, as many as :func:`params`."""
    return layers * layer_params_per_gpu(w) + ends * vocab_shard_params(w)


def memory(w: Workload) -> Memory:
    """Memory of the most loaded GPU: the pipeline rank whose weights, gradients, optimizer states, activations
    and logits add up to the most. Rank r holds its stage's layers (:func:`~slowlink.workload.schedule.stage_layers`)
    and :func:`~slowlink.workload.schedule.peak_in_flight` of its chunks' activations (layers / vp each); the first
    rank the input embedding, the last the output layer and one micro-batch's :func:`logits_bytes` (the loss runs
    once per micro-batch, its backward right after it). Ranks 1 to pp - 2 hold fewer chunks the later they run, so of
    them rank 1 is the most loaded."""
    p, t = w.parallel, w.training
    shard = p.dp_shards
    micro = w.micro_batches
    layers_of = stage_layers(w)
    weights = kept_bytes(t.precision)
    layer_weights = weight_bytes(w)  # FP8 where the stack keeps FP8 weights (training.fp8_param_gather)
    states = optimizer_state_bytes(t.precision, w.stack)
    # FSDP2's fp32 accumulator (autograd_fp32) holds the whole unsharded gradient until the reduce-scatter
    grads = grad_bytes(w)
    grad_shard = shard if p.zero >= 2 and t.grad_accumulation != "autograd_fp32" else 1
    per_layer = activation_bytes_per_layer(w)
    # DualPipe keeps two stages a rank, "Parameter 2x", and PP + 1 micro-batches' activations where 1F1B keeps PP
    # (DeepSeek-V3, arXiv 2412.19437, Table 2); ZB-H1 keeps 1F1B's (Qi et al. 2023)
    dual = p.pp_schedule == "dualpipe"
    copies, held = (2.0, (p.pp + 1) / p.pp) if dual else (1.0, 1.0)

    def rank(r: int) -> Memory:
        is_first, is_last = r == 0, r == p.pp - 1
        layers = rank_layers(layers_of, p.pp, r)
        n = stage_params(w, layers, int(is_first) + int(is_last))
        ends = int(is_first) + int(is_last)
        kept = (weights * n if layer_weights == weights
                else layer_weights * stage_params(w, layers, 0) + weights * stage_params(w, 0, ends))
        return Memory(
            weights_bytes=copies * kept / (shard if p.zero >= 3 else 1),
            grads_bytes=copies * grads * n / grad_shard,
            optimizer_bytes=copies * states * n / (shard if p.zero >= 1 else 1),
            activations_bytes=per_layer * layers / p.vp * peak_in_flight(p.pp, p.vp, micro, r) * held,
            logits_bytes=logits_bytes(w) if is_last else 0.0,
            workspace_bytes=WORKSPACE_BYTES,
            stage="only" if p.pp == 1 else "first" if is_first else "last" if is_last else "middle",
        )

    return max((rank(r) for r in sorted({0, min(1, p.pp - 1), p.pp - 1})), key=lambda mem: mem.total_bytes)


def check_fits(mem: Memory, hbm_bytes: float) -> None:
    """Raise :class:`InfeasiblePlan` with the breakdown when the plan exceeds the GPU's HBM."""
    if mem.total_bytes > hbm_bytes:
        where = "" if mem.stage == "only" else f" on the {mem.stage} pipeline stage"
        need, have = mem.total_bytes / units.GiB, hbm_bytes / units.GiB
        digits = 1  # as many decimals as it takes for the two numbers to differ (79.6 vs 79.6 said nothing)
        while digits < 4 and f"{need:.{digits}f}" == f"{have:.{digits}f}":
            digits += 1
        raise InfeasiblePlan(
            f"memory per GPU{where} ({need:.{digits}f} GiB) exceeds the GPU's HBM ({have:.{digits}f} GiB) by "
            f"{(mem.total_bytes - hbm_bytes) / units.MiB:,.0f} MiB: {mem.breakdown()}; try more tp/pp, zero, "
            "recompute or a smaller micro_batch", rule="memory_fits")
