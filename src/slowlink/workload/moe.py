"""Device work of a Megatron-Core MoE layer that the GEMMs do not cover, in HBM bytes (the loss: `workload.loss`).

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
Bytes are counted read + write per pass; the backward of a gather is a scatter of the same rows and the
reverse. The compute model divides them by the GPU's elementwise bandwidth.
"""

from __future__ import annotations

from slowlink.workload.memory import kept_bytes, mlp_kept_per_token
from slowlink.workload.spec import Workload


def local_tokens(w: Workload) -> float:
    """Tokens of one micro-batch on one GPU before dispatch: b*s/cp, /tp with sequence parallelism."""
    return w.micro_batch_tokens / w.sp_split


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
    tokens = w.micro_batch_tokens
    per_token = e.top_k * mlp_kept_per_token(m.hidden, e.expert_ffn_hidden, m.gated_mlp, p.tp)
    per_token += mlp_kept_per_token(0.0, e.expert_ffn_hidden * e.shared_experts, m.gated_mlp, p.tp)
    per_token -= mlp_kept_per_token(0.0, m.ffn_hidden, m.gated_mlp, p.tp)
    return max(0.0, tokens * kept_bytes(t.precision) * per_token)
