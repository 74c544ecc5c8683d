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
  router.py TopKRouter / moe_utils.py topk_softmax_with_capacity and switch_load_balancing_loss_func: the gating
      GEMM on the n local tokens (compute.layer_gemms), then some thirty ops on [n, experts] or [experts] tensors,
      a few kilobytes each: launch-bound, so each costs one short kernel (kernels.SHORT_KERNEL_S), counted op by
      op in ROUTER_FORWARD_OPS / ROUTER_BACKWARD_OPS; and an all-reduce of the tokens-per-expert counts over the
      TP x CP group (traffic.ep_layer).
  Router as the dgxc-benchmarking 25.02 Grok-1 recipe sets it (grok1/grok1_314b.yaml, commit 8f5cbb3):
      moe_token_dispatcher_type alltoall, moe_grouped_gemm false, moe_expert_capacity_factor 1.0,
      moe_pad_expert_input_to_capacity true, moe_aux_loss_coeff 0.01; core_r0.10.0 defaults for the rest
      (moe_router_load_balancing_type aux_loss, top-k before softmax, drop policy probs, no z-loss, no input
      jitter; transformer_config.py). With padding the dispatcher's preprocess returns early: no all-gather of
      the token counts and no cuda_sync_point (the dropless path's syncs before the all-to-all do not happen).
  Host syncs not priced: masked_select (in permute and in unpermute) sizes its output on the host, one
      cudaStreamSynchronize each, forward only (PyTorch's nonzero, pytorch/pytorch#44259; two per layer
      forward, none backward, as benchmarks/moe_router_kernels.py counted on an H200). What such a sync costs
      depends on how far the host then falls behind the GPU; no published number for it was found.
Bytes are counted read + write per pass; the backward of a gather is a scatter of the same rows and the
reverse. The compute model divides them by the GPU's elementwise bandwidth.
"""

from __future__ import annotations

from slowlink.spec.workload import Workload
from slowlink.workload.kernels import SHORT_KERNEL_S
from slowlink.workload.memory import kept_bytes, mlp_kept_per_token

# Ops of one MoE layer and micro-batch on [n, experts] or [experts] tensors, with the kernels each launches at
# least (one per ATen op that writes a tensor; an out-of-place scatter clones first), read from core_r0.10.0
# moe_utils.py (topk_softmax_with_capacity, switch_load_balancing_loss_func, save_to_aux_losses_tracker,
# permute, unpermute) and token_dispatcher.py (MoEAlltoAllTokenDispatcher.preprocess). A lower bound: the
# H200 re-enactment (benchmarks/data/moe_router_kernels_h200.json) saw 40 kernels forward where these ops and
# the bandwidth-bound ones (gating GEMM, gather, probs multiply, zeros, scatter_add) make 34 without masked_select.
ROUTER_FORWARD_OPS: tuple[tuple[str, int], ...] = (
    ("topk of the logits (top_k)", 1),
    ("softmax of the top-k scores in fp32, cast back", 2),
    ("gates: zeros_like, scatter of the probs (clone + scatter)", 3),
    ("top-k map: zeros_like, int, scatter (clone + scatter), bool", 5),
    ("tokens per expert: sum over tokens", 1),
    ("capacity: topk over the tokens (k = capacity)", 1),
    ("capacity mask: zeros_like, scatter (clone + scatter), bool", 4),
    ("padded probs: gates x capacity mask", 1),
    ("aux loss: softmax of the logits in fp32", 1),
    ("aux loss: probs.sum(0), x tokens per expert, sum, x coefficient", 4),
    ("aux-loss tracker: loss / coefficient, tracker[layer] +=", 2),
    ("dispatcher preprocess: routing_map.sum(0)", 1),
    ("permute: routing_map.T.contiguous(), arange, masked_select", 3),
    ("unpermute: probs.T.contiguous(), routing_map.T.contiguous(), masked_select", 3),
)
ROUTER_BACKWARD_OPS: tuple[tuple[str, int], ...] = (
    ("unpermute's masked_select: zeros, masked_scatter", 2),
    ("probs.T.contiguous(): copy", 1),
    ("gates x capacity mask", 1),
    ("scatter of the top-k probs: gather", 1),
    ("cast and softmax of the top-k scores", 2),
    ("topk: zeros, scatter", 2),
    ("MoEAuxLossAutoScaler: ones_like x loss scale", 2),
    ("aux loss: x coefficient, x tokens per expert", 2),
    ("aux loss: softmax of the logits", 1),
    ("logits' gradient: the routing and aux-loss paths added", 1),
    ("router weight gradient added into its fp32 main_grad (DDP hook)", 1),
)
# torch.sum of a bool tensor is int64: the tokens-per-expert counts the aux loss all-reduces
COUNT_BYTES = 8


def local_tokens(w: Workload) -> float:
    """Tokens of one micro-batch on one GPU before dispatch: b*s/cp, /tp with sequence parallelism."""
    return w.micro_batch_tokens / w.sp_split


def expert_load(w: Workload) -> float:
    """Routed rows of the most loaded expert-parallel rank over the mean (``training.moe_*``):
      padded to capacity   c, the capacity factor: every expert computes c x the mean rows
                           (Megatron-Core moe_pad_expert_input_to_capacity; moe_utils.py topk_softmax_with_capacity
                           sizes each expert's input to ceil(n k / E x c))
      capacity, no padding min(imbalance, c): the tokens beyond an expert's capacity are dropped
      dropless             the imbalance (moe_expert_capacity_factor None, Megatron-Core's default)
    Every rank waits for the most loaded one in the all-to-all and behind its expert GEMMs (the step is synchronous).
    The default, 1.0, is perfect balance: no source gives one imbalance for every router. Published anchors: Switch
    Transformer (Fedus et al. 2021, Sec. 2.2, Table 1) compares capacity factors 1.0, 1.25 and 2.0; DeepSeek-V3
    (arXiv 2412.19437, Sec. 2.1.2) balances without an auxiliary loss and drops no tokens."""
    t = w.training
    cap = t.moe_capacity_factor
    if cap is not None and t.moe_pad_to_capacity:
        return cap
    return t.moe_imbalance if cap is None else min(t.moe_imbalance, cap)


def routed_bytes(w: Workload) -> float:
    """Bytes of the routed rows the most loaded GPU takes in the EP all-to-all: n x top_k x h x e x
    :func:`expert_load` (the mean rank's, n k h e, when balanced)."""
    m = w.model
    top_k = m.moe.top_k if m.moe is not None else 0
    return local_tokens(w) * top_k * m.hidden * kept_bytes(w.training.precision) * expert_load(w)


def dispatch_bytes(w: Workload) -> tuple[float, float]:
    """(forward, backward) HBM bytes of the token permutation and unpermutation of one MoE layer and micro-batch.

    n local tokens, r = n k routed rows of h elements (e bytes):
      forward  permute (gather) 2r, probs multiply 2r, zeroed output n, scatter_add r + n  -> (5r + 2n) h e
      backward permute's scatter into a zeroed [n, h]: r + 2n; scatter_add's gather 2r; probs multiply 2r
               for the rows' gradient and 2r for the probs' gradient (a row-wise dot)  -> (7r + 2n) h e;
               the layer input's gradients from the router's GEMM and from permute (and the shared experts)
               added by autograd: 3n each
      each     when local experts > 1: sort_chunks_by_idxs, a copy (read + write) of the tp x r gathered rows
               on the way in and one on the way out: 4 tp r h e; SequentialMLP's torch.cat of the experts'
               outputs forward and, backward, the cat that torch.split's backward makes of their input
               gradients (core_r0.10.0 experts.py): 2 tp r h e
    """
    m, p = w.model, w.parallel
    if m.moe is None:
        return 0.0, 0.0
    n = local_tokens(w)
    r = n * m.moe.top_k
    row = m.hidden * kept_bytes(w.training.precision)
    local = m.moe.experts // p.ep > 1
    copies = 6.0 * p.tp * r * row if local else 0.0
    adds = 3.0 * n * row * (2.0 if m.moe.shared_experts else 1.0)
    return (5.0 * r + 2.0 * n) * row + copies, (7.0 * r + 2.0 * n) * row + adds + copies


def router_kernels_s(w: Workload) -> tuple[float, float]:
    """(forward, backward) seconds of one MoE layer's launch-bound router and dispatcher ops for one micro-batch:
    the kernels of ROUTER_FORWARD_OPS / ROUTER_BACKWARD_OPS, each one short kernel (SHORT_KERNEL_S)."""
    if w.model.moe is None:
        return 0.0, 0.0
    return (sum(k for _, k in ROUTER_FORWARD_OPS) * SHORT_KERNEL_S,
            sum(k for _, k in ROUTER_BACKWARD_OPS) * SHORT_KERNEL_S)


def token_count_bytes(w: Workload) -> float:
    """Bytes of the tokens-per-expert counts that switch_load_balancing_loss_func all-reduces over the TP x CP
    group every forward (core_r0.10.0 moe_utils.py; router.py passes the tensor-and-context-parallel group)."""
    m = w.model
    return 0.0 if m.moe is None else float(m.moe.experts * COUNT_BYTES)


def expert_activation_bytes(w: Workload) -> float:
    """Activation bytes of one MoE layer's expert MLPs in place of the dense MLP's inner tensors that
    :func:`~slowlink.workload.memory.activation_bytes_per_layer` counts (both from
    :func:`~slowlink.workload.memory.mlp_kept_per_token`).

    The layer's input stays counted there as the dense MLP's input: the router and the shared experts keep
    it. Per GPU the local experts see the micro-batch's T = b*s/cp tokens k times (gathered over TP; x
    :func:`expert_load` on the most loaded GPU): each
    routed row keeps its own copy as the first GEMM's input (h) and the inner tensors of an expert_ffn MLP;
    shared experts keep the inner tensors of an MLP of shared_experts x expert_ffn.
    """
    m, p, t = w.model, w.parallel, w.training
    if m.moe is None:
        return 0.0
    e = m.moe
    tokens = w.micro_batch_tokens
    per_token = e.top_k * expert_load(w) * mlp_kept_per_token(m.hidden, e.expert_ffn_hidden, m.gated_mlp, p.tp)
    per_token += mlp_kept_per_token(0.0, e.expert_ffn_hidden * e.shared_experts, m.gated_mlp, p.tp)
    per_token -= mlp_kept_per_token(0.0, m.ffn_hidden, m.gated_mlp, p.tp)
    return max(0.0, tokens * kept_bytes(t.precision) * per_token)
