"""Seconds of each parallel dimension's traffic per step, total and exposed (what the step waits for).

Volumes are in :mod:`slowlink.workload.comm`; exposure rules (per micro-batch on the busiest stage):
  TP  exposed unless overlap.tp_comm with SP: then each collective against the GEMM TE pairs it with
      (:mod:`slowlink.workload.tp_overlap`); the word embedding's and the output layer's own collectives on
      the first and last stage by Megatron-Core's rules (:func:`edge_tp`); without SP a gated MLP kept as two
      linears all-reduces its input gradient twice (:func:`split_gate_up_allreduces`);
  CP  each ring hop hides behind one block of attention (1/cp of the attention core); the all-gather
      variant (K/V gathered, dK/dV reduce-scattered: Llama 3) is exposed;
  EP  exposed (the all-to-all, and with TP the routed tokens' all-gather / reduce-scatter, sit between
      router and experts), unless overlap.ep_comm pairs micro-batches (:func:`ep_layer`);
  PP  exposed (1F1B send/recv on the critical path; without SP the receiver all-gathers the 1/tp slices
      over the TP group, Narayanan et al. 2021 Sec. 4.1, or with pp_scatter_gather false every TP rank
      sends the whole tensor); with overlap.pp_comm (Megatron's overlap_p2p_comm, interleaved schedule) a
      chunk's send/recv runs beside the next chunk's compute and only what outlasts it is exposed; the
      pipeline's fill and drain still wait for every hop (step.py);
  DP  once per step: the gradient reduce-scatter/all-reduce hides behind one micro-batch's backward when
      overlap.grad_reduce, the ZeRO 1/2 parameter all-gather behind one forward when
      overlap.param_gather, except the last DDP bucket (Megatron's max(40M, 1M x dp) parameters), which
      nothing follows; with Megatron-Core's distributed optimizer (zero 1) that bucket holds at least the
      word embedding, and under interleaving (vp > 1) each model chunk's reduction starts after its own
      last backward and the step's first forward waits for chunk 0's whole gather
      (:func:`chunked_reduce_exposed_s`, :func:`chunked_gather_exposed_s`); ZeRO 3 gathers the parameters
      forward and backward and reduce-scatters them every micro-batch (:mod:`slowlink.workload.zero3`: FSDP
      per layer with prefetch, or DeepSpeed 2021 per tensor).
Hidden is not free: while a collective runs beside compute, its CTAs hold SMs the compute loses
(:func:`overlap_contention_s`).
"""

from __future__ import annotations

from dataclasses import dataclass

from slowlink.catalog import Gpu
from slowlink.collectives.constants import CHANNELS
from slowlink.spec.cluster import Cluster
from slowlink.spec.workload import Workload
from slowlink.units import PRECISION_BYTES
from slowlink.workload import zero3
from slowlink.workload.buckets import bucketed_s, dp_buckets
from slowlink.workload.comm import CommCost, groups_of
from slowlink.workload.compute import StageCompute, gemm_time_s, output_gemm
from slowlink.workload.fp8 import amax_allreduces, other_precision
from slowlink.workload.memory import (
    gathered_bytes_per_param,
    kept_bytes,
    layer_params_split,
    params_per_gpu,
    vocab_shard_params,
)
from slowlink.workload.moe import routed_bytes, token_count_bytes


@dataclass(frozen=True)
class DimComm:
    """One dimension's traffic: per layer and micro-batch (tp, cp, ep), per micro-batch (pp), per step (dp), the
    seconds in all, the seconds the step waits and the collectives issued (``calls``, each paying its latency); the
    largest collective names the link."""

    total_s: float
    exposed_s: float
    op: str
    size_bytes: float
    groups: str
    calls: float = 0.0


def comm_sm_share(sms: int, comm_ctas: int = CHANNELS) -> float:
    """Share of a GPU's SMs a running collective holds: one CTA per NCCL channel, each on an SM of its own
    ("NCCL CTAs won't share an SM with compute kernels", sjeaugey, NVIDIA/nccl issue 689). Channels: 24
    (:data:`~slowlink.collectives.constants.CHANNELS`, the HGX A100 NCCL log of nccl-tests issue 100; an
    H100 ncclAllGather beside a GEMM also launched 24 blocks, NVIDIA developer forum thread 337991)."""
    return min(1.0, comm_ctas / sms)


def overlap_contention_s(comm_s: float, compute_s: float, share: float) -> float:
    """Seconds a collective of ``comm_s`` adds to the ``compute_s`` it overlaps, when it holds ``share`` of
    the SMs while it runs: the compute beside it runs at (1 - share) of its rate, so the window lasts
    max(comm, compute + share x comm) instead of max(comm, compute).

    Only the SMs are counted, not the HBM bandwidth the collective also takes (sjeaugey, NVIDIA/nccl issue
    1433): a lower bound of the contention. Measured compute slowdowns under overlap, 4x A100/H100/MI250/MI210,
    GPT and Llama layers: 18.9% on average, 40% at most (Lee et al. 2025, arXiv 2507.03114); 24 of 108 SMs
    (A100) is 28.6%, 24 of 132 (H100) 22.2%."""
    if comm_s <= 0.0 or compute_s <= 0.0:
        return 0.0
    return max(comm_s, compute_s + share * comm_s) - max(comm_s, compute_s)


def micro_batch_act_bytes(w: Workload) -> float:
    """b*s*h/cp activation bytes of one micro-batch: what a TP collective or a PP hop moves (before any split)."""
    return w.micro_batch_tokens * w.model.hidden * kept_bytes(w.training.precision)


AMAX_BYTES = PRECISION_BYTES["fp32"]  # one amax, reduced in FP32 (TE's amax buffers are float32)


def pp_hop_bytes(w: Workload) -> float:
    """One rank's PP send per micro-batch and direction: the activation, over TP under SP or scatter/gather."""
    p = w.parallel
    return micro_batch_act_bytes(w) / (p.tp if p.sequence_parallel or p.pp_scatter_gather else 1)


def tp_layer(w: Workload, cost: CommCost) -> DimComm:
    """TP seconds of one layer and micro-batch: (total, exposed before the compute overlap)."""
    p = w.parallel
    if p.tp == 1:
        return DimComm(0.0, 0.0, "all_reduce", 0.0, "tp")
    grp, size = groups_of(p, "tp"), micro_batch_act_bytes(w)
    moe = w.model.moe
    # attention and MLP blocks; a routed-only MoE MLP has none of its own (its dispatcher's are in ep_layer)
    blocks = 1.0 if moe is not None and not moe.shared_experts else 2.0
    passes = 3.0 if w.training.recompute == "full" else 2.0
    if p.sequence_parallel:
        # op-level SAC saves the reduce-scatter outputs but not the all-gathers: those run again (workload.sac)
        gathers = 3.0 if w.training.recompute == "op_selective" else passes
        t = blocks * (gathers * cost("all_gather", size, grp) + passes * cost("reduce_scatter", size, grp))
        amax = sum(amax_allreduces(w))  # FP8 current scaling: each gathered tensor's amax, before it is quantized
        t += amax * cost("all_reduce", AMAX_BYTES, grp) if amax else 0.0
        return DimComm(t, t, "all_gather", size, "tp", blocks * (gathers + passes) + amax)
    calls = blocks * passes + split_gate_up_allreduces(w)
    total = calls * cost("all_reduce", size, grp)
    return DimComm(total, total, "all_reduce", size, "tp", calls)


def split_gate_up_allreduces(w: Workload) -> int:
    """All-reduces a layer's backward adds per micro-batch when a gated MLP keeps its gate and up projections as
    two column-parallel linears (``training.fused_gate_up`` false) under TP without SP: each linear marks its
    input for a backward all-reduce of its own (Aleph Alpha's scaling, ``ColumnParallelLinear.forward`` calls
    ``copy_to_tensor_model_parallel_region`` unless SP; ``ParallelSwiGLUMLP`` has ``dense_in`` and
    ``siglu_weight``), one more than a fused fc1's. With SP the norm gathers the input once and its backward
    reduce-scatters the summed gradient once (``rms_norm.py``): none. The two GEMMs of ffn/tp are priced as
    one of 2 ffn/tp (same FLOPs) and the sum of their input gradients (an s x h add) is left out."""
    m, p = w.model, w.parallel
    split = m.gated_mlp and not w.training.fused_gate_up and p.tp > 1 and not p.sequence_parallel
    has_tp_mlp = m.moe is None or m.moe.shared_experts > 0
    return 1 if split and has_tp_mlp else 0


@dataclass(frozen=True)
class EdgeTp:
    """TP seconds per micro-batch of the layers at the model's two ends: what the first stage waits for around the
    word embedding (``embedding_s``), the last stage around the output layer (``output_s``; ``output_deferred_s``
    for a micro-batch whose weight gradient overlap.defer_embedding_wgrad defers), and all their collectives
    (``total_s``, ``calls`` collectives, a micro-batch whose weight gradient is not deferred); of the waits, what falls
    in the forward (``embedding_fwd_s``, ``output_fwd_s``)."""

    embedding_s: float
    output_s: float
    output_deferred_s: float
    total_s: float
    embedding_fwd_s: float = 0.0
    output_fwd_s: float = 0.0
    calls: float = 0.0


def edge_tp(w: Workload, cost: CommCost, gpu: Gpu) -> EdgeTp:
    """The word embedding's and the output layer's TP collectives (Megatron-Core core_r0.10.0, neither is a TE
    module, so userbuffers never pairs them; x = one micro-batch's activations, :func:`micro_batch_act_bytes`):
      embedding     tensor_parallel/layers.py VocabParallelEmbedding.forward: each rank holds a vocabulary slice,
                    so the lookups are partial sums: reduce-scattered to the SP slices (LanguageModelEmbedding
                    sets reduce_scatter_embeddings with SP), else all-reduced; backward: the reduce-scatter's
                    all-gather (an all-reduce's backward moves nothing). Both block the compute stream.
      output layer  ColumnParallelLinear via LinearWithGradAccumulationAndAsyncCommunication: forward all-gathers
                    the SP input before its GEMM (blocking); backward all-gathers it again (async) beside the
                    data-gradient GEMM and reduce-scatters the data gradient (async) beside the weight-gradient
                    GEMM, each waiting only for what outlasts its GEMM; a deferred weight gradient skips the
                    all-gather and leaves the reduce-scatter nothing to hide behind. Without SP: one all-reduce of
                    the data gradient beside the weight-gradient GEMM (none in forward).
    With ``training.cross_entropy: gathered`` the output layer's forward also all-gathers the whole logits
    (b*s/cp x V, :mod:`slowlink.workload.loss`), blocking. Each exposed; at tp 1 nothing."""
    p, t = w.parallel, w.training
    if p.tp == 1:
        return EdgeTp(0.0, 0.0, 0.0, 0.0)
    grp, size = groups_of(p, "tp"), micro_batch_act_bytes(w)
    dgrad, wgrad = (gemm_time_s(g, gpu, other_precision(w)) for g in output_gemm(w).backward())
    gathered = 1.0 if t.cross_entropy == "gathered" else 0.0
    logits = (cost("all_gather", w.micro_batch_tokens * w.model.vocab * kept_bytes(t.precision), grp)
              if gathered else 0.0)
    if not p.sequence_parallel:
        ar = cost("all_reduce", size, grp)
        return EdgeTp(ar, logits + max(0.0, ar - wgrad), logits + ar, 2.0 * ar + logits, embedding_fwd_s=ar,
                      output_fwd_s=logits, calls=2.0 + gathered)
    ag, rs = cost("all_gather", size, grp), cost("reduce_scatter", size, grp)
    return EdgeTp(embedding_s=rs + ag, output_s=logits + ag + max(0.0, ag - dgrad) + max(0.0, rs - wgrad),
                  output_deferred_s=logits + ag + rs, total_s=rs + ag + 2.0 * ag + rs + logits, embedding_fwd_s=rs,
                  output_fwd_s=ag + logits, calls=5.0 + gathered)


def cp_layer(w: Workload, cost: CommCost, lc: StageCompute) -> DimComm:
    """Ring-attention seconds of one layer and micro-batch; each hop hides behind a block of attention."""
    p, m = w.parallel, w.model
    if p.cp == 1:
        return DimComm(0.0, 0.0, "send_recv", 0.0, "cp_pairs")
    kv = w.micro_batch_tokens * (m.k_width + m.v_width) / p.tp * kept_bytes(
        w.training.precision)
    if p.cp_impl == "all_gather":  # full-sequence K/V gathered forward (again under full recompute), dK/dV
        full, grp = kv * p.cp, groups_of(p, "cp")  # reduce-scattered backward; all on the critical path
        gathers = 2.0 if w.training.recompute == "full" else 1.0
        t = gathers * cost("all_gather", full, grp) + cost("reduce_scatter", full, grp)
        return DimComm(t, t, "all_gather", full, "cp", gathers + 1.0)
    hop = cost("send_recv", kv, groups_of(p, "cp_pairs"))
    passes = 1.0 + 2.0 + (1.0 if w.training.recompute == "full" else 0.0)
    hidden = lc.attn_core_s / p.cp
    return DimComm((p.cp - 1) * hop * passes, (p.cp - 1) * max(0.0, hop - hidden) * passes, "send_recv", kv,
                   "cp_pairs", (p.cp - 1) * passes)


def ep_layer(w: Workload, cost: CommCost, lc: StageCompute | None = None, micro: int = 1) -> DimComm:
    """Token-dispatch seconds of one MoE layer and micro-batch, forward + backward: the EP all-to-all (dispatch
    + combine) and, with TP > 1, the all-gather / reduce-scatter of the routed tokens over the TP group that
    Megatron-Core's MoEAlltoAllTokenDispatcher runs between the all-to-all and the experts (core_r0.10.0
    token_dispatcher.py; expert TP defaults to TP). Both sit on the compute stream between router and experts:
    exposed. Each forward the router's aux loss also all-reduces the tokens-per-expert counts over the TP x CP
    group (moe.token_count_bytes), a blocking call on the compute stream: exposed.

    With ``overlap.ep_comm`` (batch-level overlap: DeepSeek-V3's DualPipe, arXiv 2412.19437 Sec. 3.2.1, pairs the
    forward chunk of one micro-batch with the backward chunk of another so that "both all-to-all and PP
    communication can be fully hidden"; Megatron-Core v0.14's --overlap-moe-expert-parallel-comm does the same in
    1F1B) the ``micro`` micro-batches of a step run as micro - 1 pairs, forward of micro-batch i + 1 beside backward
    of micro-batch i: a pair's dispatch traffic (one micro-batch's forward and backward, ``t``) hides behind the pair's
    layer compute (``lc``: one layer's forward and backward), waiting max(0, t - compute); the first forward and the
    last backward have no partner and wait whole. Per layer and micro-batch: (t + (micro - 1) max(0, t - compute)) /
    micro."""
    p, m = w.parallel, w.model
    if m.moe is None or (p.ep == 1 and p.tp == 1 and p.cp == 1):
        return DimComm(0.0, 0.0, "all_to_all", 0.0, "ep")
    size = routed_bytes(w)
    passes = 2.0 + (1.0 if w.training.recompute == "full" else 0.0)  # forward, backward, recomputed forward
    a2a = 2.0 * passes * cost("all_to_all", size, groups_of(p, "ep")) if p.ep > 1 else 0.0
    gathered = size * p.tp
    tp = passes * (cost("all_gather", gathered, groups_of(p, "tp")) + cost("reduce_scatter", gathered,
                                                                            groups_of(p, "tp"))) if p.tp > 1 else 0.0
    counts = (passes - 1.0) * cost("all_reduce", token_count_bytes(w), groups_of(p, "tp_cp"))
    t = a2a + tp + counts
    calls = ((2.0 * passes if p.ep > 1 else 0.0) + (2.0 * passes if p.tp > 1 else 0.0)
             + (passes - 1.0 if p.tp * p.cp > 1 else 0.0))
    exposed = t
    if w.overlap.ep_comm and lc is not None:
        exposed = (t + (micro - 1) * max(0.0, t - lc.total_s)) / micro
    if p.ep > 1:
        return DimComm(t, exposed, "all_to_all", size, "ep", calls)
    return DimComm(t, exposed, "all_gather", gathered, "tp", calls)


def pp_microbatch(w: Workload, cost: CommCost, chunk: StageCompute | None = None) -> DimComm:
    """Pipeline send/recv seconds of one micro-batch on one stage (forward + backward, every chunk).

    Exposed = total, unless ``overlap.pp_comm``: Megatron-Core core_r0.10.0's interleaved schedule with
    overlap_p2p_comm (pipeline_parallel/schedules.py, forward_backward_pipelining_with_interleaving, steady
    state) posts a chunk's forward send / next receive right after its forward and waits for that receive only
    before the next forward, after one backward chunk; the backward's send / receive likewise wait through one
    forward chunk. Per hop the step then waits max(0, hop - that chunk's compute) (``chunk``: one virtual
    stage's forward and backward seconds; None = nothing to hide behind).
    """
    p = w.parallel
    if p.pp == 1:
        return DimComm(0.0, 0.0, "send_recv", 0.0, "pp_pairs")
    split = p.sequence_parallel or p.pp_scatter_gather  # SP, or scatter/gather (Narayanan et al. 2021, Sec. 4.1)
    size = pp_hop_bytes(w)
    hop = cost("send_recv", size, groups_of(p, "pp_pairs"))
    per_hop = 1.0
    if p.tp > 1 and not p.sequence_parallel and split:  # the receiver re-assembles the tensor over NVLink
        hop += cost("all_gather", micro_batch_act_bytes(w), groups_of(p, "tp"))
        per_hop = 2.0
    t, calls = 2.0 * p.vp * hop, 2.0 * p.vp * per_hop
    if not w.overlap.pp_comm or chunk is None:
        return DimComm(t, t, "send_recv", size, "pp_pairs", calls)
    # the forward hop waits through a backward chunk, the backward hop through a forward chunk
    exposed = p.vp * (max(0.0, hop - chunk.backward_s) + max(0.0, hop - chunk.forward_s))
    return DimComm(t, exposed, "send_recv", size, "pp_pairs", calls)


def chunked_reduce_exposed_s(chunk_s: list[float], last_bucket_s: float, chunk_backward_s: float,
                             pp: int) -> float:
    """Seconds the step waits, after the first pipeline rank's last backward, for the gradient reduction of
    ``chunk_s`` (seconds of each model chunk's reduction, chunk 0 first) run one after another on the DP
    communicator, as Megatron-Core core_r0.10.0 with overlap_grad_reduce schedules them:

    - the reduction of a chunk is enabled only for its last micro-batch's backward
      (pipeline_parallel/schedules.py l.933-937; NeMo 2.1 sets no grad_sync_func without an
      ``align_grad_reduce`` that core_r0.10.0's DDP config lacks, nemo/lightning/megatron_parallel.py
      l.107-116), its buckets start as their gradients are ready (param_and_grad_buffer.py l.386-403);
    - only chunk 0 of the first pipeline rank has buckets (distributed_data_parallel.py l.69-77; the
      caller's disable_bucketing = chunk > 0, megatron/training/training.py l.582, NeMo
      megatron_parallel.py l.584): any other chunk is one bucket, started when its last backward ends;
    - in the cooldown the first rank runs the last ``pp`` backwards of chunk vp-1, then of vp-2, ... chunk 0
      last (groups of microbatch_group_size_per_vp_stage = pp micro-batches, schedules.py l.718-752, and
      l.656-665 refuses a last group that is not whole): chunk c's last backward ends
      pp x c chunk backwards (``chunk_backward_s``: one chunk, one micro-batch) before the end. Bubbles in
      the cooldown, which would hide more, are not counted.

    Megatron-LM's own loop (align_grad_reduce, default on: training.py l.1343-1346) instead starts each
    chunk's whole reduction after its last backward (schedules.py l.956-966), chunk 0's too: not modelled.

    Chunk 0's buckets but the last start no earlier than its last backward begins (as with vp = 1); the last
    (``last_bucket_s``) only when it ends. With one chunk: max(chunk - backward, last bucket), the vp = 1 rule.
    """
    free = float("-inf")  # when the DP stream is free, 0 = the end of the last backward
    for c in range(len(chunk_s) - 1, 0, -1):
        free = max(free, -pp * c * chunk_backward_s) + chunk_s[c]
    free = max(free, -chunk_backward_s) + chunk_s[0] - last_bucket_s
    return max(free, 0.0) + last_bucket_s


def chunked_gather_exposed_s(chunk_s: list[float], chunk_forward_s: float, pp: int) -> float:
    """Seconds the parameter all-gathers (``chunk_s``: each model chunk's, chunk 0 first) delay the first
    pipeline rank's forwards under interleaving with overlap_param_gather and align_param_gather (Megatron-LM's
    default; NeMo 2.1 sets it when pp > 1 and vp > 1, lightning/pytorch/callbacks/megatron_comm_overlap.py
    l.184-191), Megatron-Core core_r0.10.0:

    - chunks 0 and 1 are gathered before the first forward (pipeline_parallel/schedules.py l.713-716), each
      chunk c >= 2 when chunk c-1's first forward starts (l.867-880);
    - a chunk's gather issues all its buckets, last layers first (distributed_data_parallel.py l.398-418;
      bucket 0 holds the last parameters, param_and_grad_buffer.py l.533-561); the first forward needs the
      embedding's bucket, issued last, and waits for the whole of chunk 0 (forward pre-hook, l.327-357);
    - in the warmup the first rank starts chunk c's first forward pp chunk forwards (``chunk_forward_s``)
      after chunk c-1's (schedule table, schedules.py l.718-752), or when its gather ends.
    """
    start = end = chunk_s[0]  # chunk 0's first forward, and when the DP stream is free
    for c in range(1, len(chunk_s)):
        end = max(end, start if c >= 2 else 0.0) + chunk_s[c]
        start = max(start + pp * chunk_forward_s, end)
    return start - (len(chunk_s) - 1) * pp * chunk_forward_s


def dp_step(w: Workload, cost: CommCost, lc: StageCompute, layers: int, micro: int, gpu: Gpu) -> DimComm:
    """DP seconds per step: gradient reduction and ZeRO parameter gathers, total and exposed (``gpu``: the HBM
    bandwidth DeepSpeed 2021's ZeRO-3 copies run at), one collective per bucket of the workload's stack.

    zero 1 is Megatron-Core's distributed optimizer: its last bucket holds the word embedding, and with
    vp > 1 the exposure follows the interleaved schedule (:func:`chunked_reduce_exposed_s`,
    :func:`chunked_gather_exposed_s`, per chunk of the first pipeline rank: ``layers`` / vp layers, chunk 0
    with the embedding, the only chunk with buckets). zero 0 (PyTorch or Megatron DDP) and zero 2 keep the
    one-chunk rule; ZeRO-2 of a stack that shards per FSDP unit (``stack.sharded_unit: layer``) reduces and gathers
    one unit per layer and one per end of the model. Without overlap.grad_reduce a stack with
    ``buckets_without_overlap`` false reduces each gradient buffer in one call (Megatron-Core)."""
    p, o = w.parallel, w.overlap
    if p.dp_shards == 1:
        return DimComm(0.0, 0.0, "all_reduce", 0.0, "dp_cp")
    if p.zero >= 3:
        return zero3_step(w, cost, lc, layers, micro, gpu)
    dense_n, expert_n = _local_params(w)
    g_bytes = PRECISION_BYTES[w.training.grad_comm_dtype]
    w_bytes = gathered_bytes_per_param(w)  # FP8 Linear weights with training.fp8_param_gather
    dim = "dp_cp" if p.cp > 1 else "dp"
    reduce_op = "all_reduce" if p.zero == 0 or p.zero1_grad_reduce == "all_reduce" else "reduce_scatter"
    edp = bool(expert_n) and p.dp // p.ep > 1
    b = dp_buckets(w, layers, dense_n, expert_n, g_bytes)

    def reduce_s(dense: float, expert: float, bucketed: bool = True) -> tuple[float, int]:
        size, first = (b.grad, b.first) if bucketed else (None, None)
        t, n = bucketed_s(cost, reduce_op, dense, g_bytes, size, groups_of(p, dim), first)
        te, ne = bucketed_s(cost, reduce_op, expert, g_bytes, size, groups_of(p, "edp")) if edp else (0.0, 0)
        return t + te, n + ne

    def gather_s(dense: float, expert: float, bucketed: bool = True) -> tuple[float, int]:
        size = b.gather if bucketed else None
        t, n = bucketed_s(cost, "all_gather", dense, w_bytes, size, groups_of(p, dim))
        te, ne = bucketed_s(cost, "all_gather", expert, w_bytes, size, groups_of(p, "edp")) if edp else (0.0, 0)
        return t + te, n + ne

    chunks = _chunk_params(w, layers) if p.zero == 1 and p.vp > 1 else None
    if chunks is None:
        red_chunks = [reduce_s(dense_n, expert_n)]
        gat_chunks = [gather_s(dense_n, expert_n) if p.zero >= 1 else (0.0, 0)]
    else:  # chunk 0 alone has buckets (distributed_data_parallel.py l.69-77)
        red_chunks = [reduce_s(d, e, c == 0) for c, (d, e) in enumerate(chunks)]
        gat_chunks = [gather_s(d, e, c == 0) for c, (d, e) in enumerate(chunks)]
    red, red_calls = sum(t for t, _ in red_chunks), sum(n for _, n in red_chunks)
    gather, gather_calls = sum(t for t, _ in gat_chunks), sum(n for _, n in gat_chunks)
    red_exp = red
    if o.grad_reduce and chunks is not None:
        red_exp = chunked_reduce_exposed_s([t for t, _ in red_chunks], reduce_s(b.last, 0.0, False)[0],
                                           layers * lc.backward_s / p.vp, p.pp)
    elif o.grad_reduce:
        red_exp = max(red - layers * lc.backward_s, reduce_s(b.last, 0.0, False)[0])
    gat_exp = gather
    if o.param_gather and p.zero >= 1 and chunks is not None:
        gat_exp = chunked_gather_exposed_s([t for t, _ in gat_chunks], layers * lc.forward_s / p.vp, p.pp)
    elif o.param_gather and p.zero >= 1:
        gat_exp = max(gather - layers * lc.forward_s, gather_s(b.last, 0.0, False)[0])
    return DimComm(red + gather, red_exp + gat_exp, reduce_op, dense_n * g_bytes, dim, red_calls + gather_calls)


def _chunk_params(w: Workload, layers: int) -> list[tuple[float, float]]:
    """(dense, expert) parameters of each model chunk of the first pipeline rank, chunk 0 first: ``layers`` /
    vp layers each (``layers``: the busiest stage's), chunk 0 also the word embedding."""
    dense, expert = layer_params_split(w)
    per_chunk = layers / w.parallel.vp
    return [(dense * per_chunk + (vocab_shard_params(w) if c == 0 else 0.0), expert * per_chunk)
            for c in range(w.parallel.vp)]


def zero3_step(w: Workload, cost: CommCost, lc: StageCompute, layers: int, micro: int, gpu: Gpu) -> DimComm:
    """ZeRO-3 seconds per step, by ``parallel.zero3_impl`` (:mod:`slowlink.workload.zero3`)."""
    p = w.parallel
    dense_n, expert_n = _local_params(w)
    dim = "dp_cp" if p.cp > 1 else "dp"
    if p.zero3_impl == "deepspeed-2021":
        total, exposed, calls = zero3.deepspeed_2021_step(w, cost, layers, micro, gpu)
    else:  # experts: gathered in the same unit (ep = 1 view)
        total, exposed, calls = zero3.fsdp_step(w, cost, lc, layers, micro, dense_n + expert_n)
    per_layer = (dense_n + expert_n) / max(layers, 1)
    return DimComm(total, exposed, "all_gather", per_layer * gathered_bytes_per_param(w), dim, calls)


def _local_params(w: Workload) -> tuple[float, float]:
    """(dense, expert) parameters of one GPU's shard of the model (before ZeRO)."""
    from slowlink.workload.flops import params

    dense, expert = params(w.model)
    p = w.parallel
    if not expert:
        return params_per_gpu(w), 0.0
    return dense / (p.tp * p.pp), expert / (p.tp * p.pp * p.ep)


def all_dims(w: Workload, cluster: Cluster, cost: CommCost, lc: StageCompute, layers: int,
             micro: int) -> dict[str, DimComm]:
    """Every dimension's traffic; tp/cp/ep per layer and micro-batch, pp per micro-batch, dp per step."""
    return {"tp": tp_layer(w, cost), "cp": cp_layer(w, cost, lc), "ep": ep_layer(w, cost, lc, micro),
            "pp": pp_microbatch(w, cost, virtual_stage(lc, layers, w.parallel.vp)),
            "dp": dp_step(w, cost, lc, layers, micro, cluster.gpu)}


def virtual_stage(lc: StageCompute, layers: int, vp: int) -> StageCompute:
    """One model chunk's compute: ``layers`` (a stage's) / ``vp`` layers of ``lc`` each."""
    return StageCompute(lc.forward_s * layers / vp, lc.backward_s * layers / vp)
