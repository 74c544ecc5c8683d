"""ZeRO-3 / FSDP parameter sharding: the seconds of its gathers and gradient reduce-scatters per step.

Two implementations, chosen by ``parallel.zero3_impl``:

``fsdp`` (PyTorch FSDP, DeepSpeed >= 0.5): one flat parameter per transformer block, all-gathered before its
    forward and its backward and reduce-scattered after its backward (Rajbhandari et al. 2020, Sec. 7.2.2:
    3x the parameters per micro-batch), prefetched one block ahead (Zhao et al. 2023, Sec. 3.3).
``deepspeed-2021`` (DeepSpeed <= 0.4.0, the ZeRO-3 of Narayanan et al. 2021, Table 2), read from
    ``deepspeed/runtime/zero/stage3.py`` and ``partition_parameters.py`` at commit b3870363 (May 2021):
    - every tensor of at least ``stage3_param_persistence_threshold`` (1e5) elements is gathered on its
      own, when its sub-module (each ``nn.Linear``) runs; smaller ones (biases, norms) stay whole;
    - each gather is preceded by ``torch.cuda.synchronize()`` and every sub-module fetch synchronizes the
      device again, so nothing overlaps (DeepSpeed PR #1188, opened June 2021, merged 2021-10-31 as c0eeb69d:
      "the async version is not async at all"; issue #1174: a 5B model's ZeRO-3 forward took 480 ms against
      60 ms under ZeRO-2 on one node). Assumed: the trace-based prefetch (``prefetch_next_sub_modules``) is
      off; when the first step's sub-module trace holds it gathers the next sub-module while the current one
      computes, which would make this model faster still (DeepSpeed PR #873, March 2021: the prefetcher "was
      essentially disabled if the sub-module access pattern changed after the first iteration");
    - the gather and the gradient reduce-scatter use the list form of ``torch.distributed``: PyTorch's
      ProcessGroupNCCL (1.8) copies each of the n ranks' slices out of (all_gather) or into (reduce_scatter)
      a flat buffer, one ``copy_`` per rank, serially on the communicator's stream;
    - a tensor gathered for the recomputed forward stays for its backward only if the parameters used in
      between (``get_reuse_distance_in_numel``) are fewer than ``stage3_max_reuse_distance`` (1e9);
    - gradients are reduce-scattered per tensor (``_reduce_scatter_gradients``; ``reduce_scatter_coalesced``
      came with PR #1453, 2022-01-20), in the parameters' dtype (fp16; ``allreduce_always_fp32`` off),
      on the same process group (one NCCL stream), and waited for by the next fetch's synchronize;
    - DeepSpeed's own Python builds the per-rank lists, one eager tensor call per rank and list entry, on the
      host while the device waits (the gather loop runs after the synchronize): ``_allgather_param`` one
      ``narrow`` per rank, ``_reduce_scatter_gradient`` a ``view`` and a ``narrow`` per rank;
    - the persistent tensors (the small ones: LayerNorm weights and biases, linear biases) are released after
      every backward (``_partition_all_parameters``) and re-gathered after every optimizer step
      (``_post_step``: ``_allgather_params``): one list all_gather of all their partitions, then for each
      persistent tensor and each rank a ``narrow``, a ``view``, a ``narrow`` and a ``copy_`` from Python.
      The same code is in v0.3.13 (March 2021) through v0.4.0 (June 2021); with ~770 persistent tensors in
      GPT-3 175B that is ~1.2M Python iterations per step at 1,536 ranks.
"""

from __future__ import annotations

from slowlink.workload.comm import CommCost, groups_of
from slowlink.workload.compute import StageCompute
from slowlink.workload.memory import kept_bytes
from slowlink.workload.spec import DTYPE_BYTES, Model, Workload

# DeepSpeed defaults (deepspeed/runtime/zero/constants.py, 2021): tensors below this many elements are not
# partitioned (stage3_param_persistence_threshold); a gathered tensor is kept while its next use is closer
# than this many elements of other parameters (stage3_max_reuse_distance).
DS_PERSISTENCE_NUMEL = 1e5
DS_MAX_REUSE_NUMEL = 1e9
# Seconds of one short kernel issued back to back from one CPU thread: 3.8 us per kernel (NVIDIA, "Getting
# Started with CUDA Graphs", Gray 2019: a 2.9 us kernel costs 3.8 us in a stream without graphs). The
# list-based all_gather/reduce_scatter issues one such copy per rank.
SHORT_KERNEL_S = 3.8e-6
# Host seconds of one eager PyTorch call from Python on a tiny tensor: 2.3 us, PyTorch's operator_benchmark
# ``split_M8_N8_parts2`` (a view op, 8x8 tensor), as published in pytorch/pytorch PR #32194 (Jan 2020: 3.3 us
# before that PR, 2.26 us after it, which PyTorch 1.8 includes). ``copy_`` (TensorIterator set-up and a
# cudaMemcpyAsync) and ``dist.get_rank`` cost more and are charged the same or nothing: a lower bound.
EAGER_CALL_S = 2.3e-6
# Eager calls per rank in DeepSpeed's Python loops (v0.3.13-v0.4.0, partition_parameters.py): the per-tensor
# gather (narrow), the per-tensor reduce-scatter (view, narrow), the post-step gather of the persistent tensors
# (one narrow per rank, then narrow, view, narrow, copy_ per persistent tensor and rank).
CALLS_PER_RANK_GATHER = 1
CALLS_PER_RANK_SCATTER = 2
CALLS_PER_RANK_PERSISTENT = 4


def layer_tensors(m: Model, tp: int) -> list[float]:
    """Elements of each weight matrix of one layer on one GPU, in forward order: QKV, output projection, MLP in
    (gate and up fused, as Megatron stores them), MLP out; for MoE the router and each expert's in/out."""
    h, h_kv = m.hidden, m.hidden * m.kv_heads // m.heads
    up = 2 if m.gated_mlp else 1
    out = [h * (h + 2 * h_kv) / tp, h * h / tp]
    if m.moe is None:
        return [*out, up * h * m.ffn_hidden / tp, h * m.ffn_hidden / tp]
    f = m.moe.expert_ffn_hidden
    out.append(float(h * m.moe.experts))
    for _ in range(m.moe.experts + m.moe.shared_experts):
        out += [up * h * f / tp, h * f / tp]
    return out


def small_tensors(m: Model, tp: int) -> list[float]:
    """Elements of the small tensors of one layer on one GPU, as Megatron's GPT layer holds them: non-gated
    (GPT-2/3): two LayerNorms (weight, bias) and the biases of QKV, output projection, MLP in and MLP out;
    gated (Llama family): two RMSNorm weights, no biases. The final norm is added per model
    (:func:`persistent_tensors`)."""
    h, h_kv = m.hidden, m.hidden * m.kv_heads // m.heads
    if m.gated_mlp:
        return [float(h), float(h)]
    ffn = m.ffn_hidden if m.moe is None else m.moe.expert_ffn_hidden
    return [float(h), float(h), (h + 2 * h_kv) / tp, float(h), float(h), float(h), ffn / tp, float(h)]


def persistent_tensors(m: Model, tp: int, layers: int) -> list[float]:
    """Every tensor of ``layers`` layers (and the final norm) below ``stage3_param_persistence_threshold``:
    DeepSpeed keeps them whole during the step and re-gathers them after it."""
    per_layer = [x for x in small_tensors(m, tp) if x * tp < DS_PERSISTENCE_NUMEL]
    per_layer += [x for x in layer_tensors(m, tp) if x * tp < DS_PERSISTENCE_NUMEL]
    final = [float(m.hidden)] * (1 if m.gated_mlp else 2)
    return per_layer * layers + final


def host_loop_s(ranks: int, calls_per_rank: int) -> float:
    """Seconds of one DeepSpeed per-rank Python loop: ranks x calls x one eager call (EAGER_CALL_S)."""
    return ranks * calls_per_rank * EAGER_CALL_S


def post_step_gather_s(w: Workload, cost: CommCost, grp: list[list[int]], layers: int) -> float:
    """Seconds of ``_post_step``'s gather of the persistent tensors: one list all_gather of all of them
    (NCCL time + one copy per rank), one narrow per rank, then 4 eager calls per persistent tensor and rank."""
    ranks = len(grp[0])
    small = persistent_tensors(w.model, w.parallel.tp, layers)
    nccl = cost("all_gather", sum(small) * kept_bytes(w.training.precision), grp) + ranks * SHORT_KERNEL_S
    return nccl + host_loop_s(ranks, CALLS_PER_RANK_GATHER + CALLS_PER_RANK_PERSISTENT * len(small))


def gathers_per_microbatch(numels: list[float], recompute: bool) -> list[int]:
    """All-gathers of each tensor per micro-batch under DeepSpeed's reuse rule: forward, recomputed forward,
    backward; the backward one is skipped when the tensors used between the recompute and the backward
    (every later tensor twice: its recompute and its backward) hold fewer than DS_MAX_REUSE_NUMEL elements."""
    if not recompute:
        return [2] * len(numels)
    return [2 if 2.0 * sum(numels[i + 1:]) < DS_MAX_REUSE_NUMEL else 3 for i in range(len(numels))]


def deepspeed_2021_step(w: Workload, cost: CommCost, layers: int, micro: int) -> tuple[float, float]:
    """(total, exposed) seconds per step of DeepSpeed 2021 ZeRO-3: per-tensor collectives at the full DP size,
    each paying the collective model's time (ring latency of n-1 steps included), one short kernel per rank
    for the list API and DeepSpeed's per-rank Python loop; plus the post-step gather of the persistent
    tensors; none overlaps with compute (module docstring)."""
    p = w.parallel
    dim = "dp_cp" if p.cp > 1 else "dp"
    grp = groups_of(p, dim)
    ranks = len(grp[0])
    w_bytes, g_bytes = kept_bytes(w.training.precision), DTYPE_BYTES[w.training.grad_comm_dtype]
    full = layer_tensors(w.model, p.tp)  # DeepSpeed counts a tensor's full size (ds_numel)
    g_loop, s_loop = host_loop_s(ranks, CALLS_PER_RANK_GATHER), host_loop_s(ranks, CALLS_PER_RANK_SCATTER)
    per_layer = 0.0
    for numel, n_gather in zip(full, gathers_per_microbatch(full, w.training.recompute == "full"), strict=True):
        if numel * p.tp < DS_PERSISTENCE_NUMEL:
            continue
        gather = cost("all_gather", numel * w_bytes, grp) + ranks * SHORT_KERNEL_S + g_loop
        scatter = cost("reduce_scatter", numel * g_bytes, grp) + ranks * SHORT_KERNEL_S + s_loop
        per_layer += n_gather * gather + scatter
    emb = w.model.vocab * w.model.hidden / p.tp  # input embedding and output layer: forward + backward each
    ends = 2.0 * (2.0 * cost("all_gather", emb * w_bytes, grp) + cost("reduce_scatter", emb * g_bytes, grp)
                  + 3.0 * ranks * SHORT_KERNEL_S + 2.0 * g_loop + s_loop)
    total = micro * (layers * per_layer + ends) + post_step_gather_s(w, cost, grp, layers)
    return total, total


def prefetched_exposed_s(comm_s: float, compute_s: float, layers: int) -> float:
    """Seconds a layer-by-layer prefetch pipeline adds to ``layers`` x ``compute_s``: the first layer's
    communication cannot start earlier, each later one hides behind the previous layer's compute
    (depth-1 prefetch: FSDP forward/backward prefetch; Zhao et al. 2023, Sec. 3.3)."""
    return comm_s + (layers - 1) * max(0.0, comm_s - compute_s)


def fsdp_step(w: Workload, cost: CommCost, lc: StageCompute, layers: int, micro: int,
              local_params: float) -> tuple[float, float]:
    """(total, exposed) seconds per step of FSDP-style ZeRO-3: every micro-batch all-gathers each layer before
    its forward and again before its backward (recomputation reuses the backward gather) and reduce-scatters
    its gradients; one collective per layer at the full DP size, behind the previous layer's compute; in the
    backward the gather of the next layer and the reduce-scatter of the last share the network."""
    p, o = w.parallel, w.overlap
    grp = groups_of(p, "dp_cp" if p.cp > 1 else "dp")
    per_layer = local_params / max(layers, 1)
    gather = cost("all_gather", per_layer * kept_bytes(w.training.precision), grp)
    scatter = cost("reduce_scatter", per_layer * DTYPE_BYTES[w.training.grad_comm_dtype], grp)
    total = micro * layers * (2.0 * gather + scatter)
    if not o.param_gather:
        return total, total
    fwd = prefetched_exposed_s(gather, lc.forward_s, layers)
    bwd = prefetched_exposed_s(gather + scatter, lc.backward_s, layers)
    return total, micro * (fwd + bwd)
