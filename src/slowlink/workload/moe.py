"""Device work of a Megatron-Core MoE layer and of the vocab-parallel loss that the GEMMs do not cover: HBM bytes.

Read from Megatron-Core core_r0.10.0 (the version NeMo 24.12 ships), github.com/NVIDIA/Megatron-LM:
  moe_layer.py MoELayer.forward: router -> token_permutation -> experts -> token_unpermutation.
  token_dispatcher.py MoEAlltoAllTokenDispatcher: permute -> A2A(EP) -> all-gather(TP) -> sort_chunks_by_idxs
      (only with more than one local expert); the reverse on the way back (sort, reduce-scatter(TP), A2A, unpermute).
  moe_utils.py permute: ``tokens.index_select`` of the n local tokens into r = n x top_k rows (capacity
      padding with capacity factor 1.0 gives ceil(n k / E) x E rows: the same r); unpermute: the rows times
      their probs, a zeroed [n, h] output, ``scatter_add_`` of the r rows into it; sort_chunks_by_idxs:
      ``torch.split`` + ``torch.cat`` (one copy) of the gathered tp x r rows.
  experts.py SequentialMLP: one MLP per local expert on tokens gathered over TP (n x tp = the whole micro-batch's
      tokens per TP rank, the expert's ffn split over TP), so the expert MLP's activations are top_k x the
      micro-batch's tokens, not the SP slice Korthikanti et al. 2022 count for a dense MLP.
  router.py / topk_softmax_with_capacity: softmax and top-k over [n, experts] in fp32: n x E x 4 bytes, a few
      kilobytes per layer; not charged (launch-bound, not bandwidth-bound).
  tensor_parallel/cross_entropy.py VocabParallelCrossEntropy: ``logits.float()``, max, ``-= max``, ``exp``,
      sum, ``div_`` over the [tokens, V/tp] logits in fp32; backward ``mul_`` by the loss gradient, then the
      autograd cast back to the GEMM's dtype (Megatron's default, cross_entropy_loss_fusion False).
Bytes are counted read + write per pass; the backward of a gather is a scatter of the same rows and the
reverse. The compute model divides them by the GPU's elementwise bandwidth.
"""

from __future__ import annotations

from slowlink.workload.memory import kept_bytes, mlp_kept_per_token
from slowlink.workload.spec import Workload

FP32_BYTES = 4.0  # the cross-entropy's logits, cast by ``.float()``
# A fused loss kernel (apex xentropy / flash-attn's cross_entropy with inplace_backward, as the FlashAttention
# training configs set, github.com/Dao-AILab/flash-attention training/configs/experiment/pile/base.yaml
# loss_fn): the forward reads the logits once, the backward reads them and writes the gradient in place.
FUSED_CE_PASSES = 3.0


def local_tokens(w: Workload) -> float:
    """Tokens of one micro-batch on one GPU before dispatch: b*s/cp, /tp with sequence parallelism."""
    p, t = w.parallel, w.training
    split = p.tp if p.sequence_parallel else 1
    return t.micro_batch * w.model.seq_len / (p.cp * split)


def routed_bytes(w: Workload) -> float:
    """Bytes of the routed rows one GPU sends into the EP all-to-all: n x top_k x h x e."""
    m = w.model
    top_k = m.moe.top_k if m.moe is not None else 0
    return local_tokens(w) * top_k * m.hidden * kept_bytes(w.training.precision)


def dispatch_bytes(w: Workload) -> tuple[float, float]:
    """(forward, backward) HBM bytes of the token permutation and unpermutation of one MoE layer and micro-batch.

    n local tokens, r = n k routed rows of h elements (e bytes):
      forward  permute (gather) 2r, probs multiply 2r, zeroed output n, scatter_add r + n  -> (5r + 2n) h e
      backward permute's scatter into a zeroed [n, h]: r + 2n; scatter_add's gather 2r; probs multiply 2r
               for the rows' gradient and 2r for the probs' gradient (a row-wise dot)  -> (7r + 2n) h e
      each     sort_chunks_by_idxs when local experts > 1: a copy (read + write) of the tp x r gathered rows
               on the way in and one on the way out: 4 tp r h e
    """
    m, p = w.model, w.parallel
    if m.moe is None:
        return 0.0, 0.0
    n = local_tokens(w)
    r = n * m.moe.top_k
    row = m.hidden * kept_bytes(w.training.precision)
    sort = 4.0 * p.tp * r * row if m.moe.experts // p.ep > 1 else 0.0
    return (5.0 * r + 2.0 * n) * row + sort, (7.0 * r + 2.0 * n) * row + sort


def expert_activation_bytes(w: Workload) -> float:
    """Activation bytes of one MoE layer's expert MLPs in place of the dense MLP's inner tensors that
    :func:`~slowlink.workload.memory.activation_bytes_per_layer` counts (both from
    :func:`~slowlink.workload.memory.mlp_kept_per_token`).

    The layer's input stays counted there as the dense MLP's input: the router and the shared experts keep
    it. Per GPU the local experts see the micro-batch's T = b*s/cp tokens k times (gathered over TP): each
    routed row keeps its own copy as the first GEMM's input (h) and the inner tensors of an expert_ffn MLP;
    shared experts keep the inner tensors of an MLP of shared_experts x expert_ffn.
    """
    m, p, t = w.model, w.parallel, w.training
    if m.moe is None:
        return 0.0
    e = m.moe
    tokens = t.micro_batch * m.seq_len / p.cp
    per_token = e.top_k * mlp_kept_per_token(m.hidden, e.expert_ffn_hidden, m.gated_mlp, p.tp)
    per_token += mlp_kept_per_token(0.0, e.expert_ffn_hidden * e.shared_experts, m.gated_mlp, p.tp)
    per_token -= mlp_kept_per_token(0.0, m.ffn_hidden, m.gated_mlp, p.tp)
    return max(0.0, tokens * kept_bytes(t.precision) * per_token)


def cross_entropy_bytes(w: Workload) -> float:
    """HBM bytes of Megatron's vocab-parallel cross-entropy, forward + backward, for one micro-batch.

    N = b*s/cp x V/tp logits of e bytes on the last stage, fp32 inside:
      forward  cast e + 4 (skipped when the logits are already fp32), max 4, -= max 8, exp 8, sum 4, div 8
      backward mul_ by the loss gradient 8, cast back 4 + e (skipped in fp32)
    ``training.cross_entropy: fused``: :data:`FUSED_CE_PASSES` passes of e bytes per logit.
    """
    m, p, t = w.model, w.parallel, w.training
    n = t.micro_batch * m.seq_len / p.cp * m.vocab / p.tp
    e = kept_bytes(t.precision)
    if t.cross_entropy == "fused":
        return n * FUSED_CE_PASSES * e
    casts = 0.0 if e == FP32_BYTES else 2.0 * (e + FP32_BYTES)
    return n * (casts + 4.0 + 8.0 + 8.0 + 4.0 + 8.0 + 8.0)
