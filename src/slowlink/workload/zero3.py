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
      60 ms under ZeRO-2 on one node);
    - the sub-module trace is off by one from v0.3.14 (PR #867, 7b46d11f, 2021-04-07) until the stage-3
      rewrite of PR #1453 (2022-01-20): ``setup_zero_stage3_hooks`` registers its step reset
      (``_pre_forward_hook``) on the top module after the top module's own fetch hook, whose ``increment_step``
      runs first, so every later sub-module's step id is one less than its place in the trace (described in
      DeepSpeed issue #1069, 2021-05-27). Both checks that read the trace then fail: ``get_params_to_prefetch``
      ("Tracing failed. Prefetching is disabled") and ``get_reuse_distance_in_numel`` ("Cannot tell if the
      sub_module is reused": 1e12 elements), so nothing is prefetched and every gathered tensor is released
      after each use: gathered for the forward, again for the recomputed forward and again for the backward
      (:func:`gathers_per_microbatch`), whatever ``stage3_max_reuse_distance`` says. v0.3.13 (March 2021) has
      no reset hook: from the second step it prefetches the next sub-module behind the current one's compute
      and keeps a tensor whose next use is near, which this model does not price (it would be faster);
    - the gather and the gradient reduce-scatter use the list form of ``torch.distributed``: PyTorch's
      ProcessGroupNCCL (1.8) copies each of the n ranks' slices out of (all_gather) or into (reduce_scatter)
      a flat buffer, one ``copy_`` per rank, serially on the communicator's stream
      (``torch/lib/c10d/ProcessGroupNCCL.cpp``, ``allgather`` post-hook and ``reduce_scatter`` pre-hook; the
      flat buffer is ``newLikeFlat``, an empty tensor. v1.8.1 itself is not in the store read; pytorch/pytorch
      00f5dfd5 (later, with ``RECORD_PARAM_COMMS``) and a pre-1.8 copy (``shared_ptr`` Work) have the same loops);
    - HBM traffic besides NCCL's (the same code at v0.3.13, 12a53b43, and v0.4.0, 2d302d6a), charged at the
      GPU's HBM bandwidth, serial like the rest: per gather of S bytes, ``_allgather_param``'s ``torch.zeros``
      of the aligned flat buffer (S written), its ``copy_`` of the own partition (S/n read and written) and
      the list all_gather's copy-out (S read and written); per
      gradient reduce-scatter, ``average_tensor``'s ``div_`` by the world size (S), the list reduce_scatter's
      copy-in (S) and ``_partition_gradient``'s copy into the fp16 partition buffer (S/n), each read and
      written; after the step, ``_allgather_params``' copies (flat buffer ``torch.empty``, no fill). GPT-3 175B:
      ~2.1 s per step at 384-1,536 ranks. Assumed ``contiguous_gradients`` on, as DeepSpeedExamples'
      Megatron-LM-v1.1.5-ZeRO3 ``ds_zero_stage_3_config.json`` sets it (March-June 2021). DeepSpeed's own
      default was off until PR #1199 (2021-07-01): ``reduce_ipg_grads`` then flattens each bucket, divides it and
      all-reduces it through ``buffered_reduce_fallback`` (twice the reduce-scatter's bytes, no per-rank
      lists). v0.3.16 alone defaults ``reduce_scatter`` off (PR #971; back on with PR #1058), which with
      contiguous gradients all-reduces the whole bucket buffer at every reduction; neither is priced.
      Not charged, as it depends on ``reduce_bucket_size``, which Table 2 does not give: a gradient of at most
      that many elements is first copied into the bucket (``reduce_independent_p_g_buckets_and_remove_grads``)
      and every reduction divides the whole bucket, not only its gradients (GPT-3 175B: ~0.4 s per step at
      the 5e8 default, ~0.05 s at the 6.7e7 of the examples' config). Dropped: the fp32 gradient and
      master-weight copies at the optimizer step are partition-sized (milliseconds);
    - outside the layers (not recomputed: one gather forward, one backward, one reduce-scatter each), a Megatron
      GPT (non-gated here, as :func:`small_tensors`) has the word embedding, which the output layer reuses as
      an external parameter of the whole model (``register_external_parameter`` in DeepSpeedExamples'
      Megatron-LM-v1.1.5-ZeRO3 ``gpt2_model.py``, 2cd968f2, March 2021; found by ``ZeROOrderedDict`` from
      v0.3.15), so it is gathered with the top module and held through the pass, and the learned position
      embedding (s x h); a gated (Llama-style) model has an untied input embedding and output layer
      (:func:`end_tensors`);
    - gradients are reduce-scattered per tensor (``_reduce_scatter_gradients``; ``reduce_scatter_coalesced``
      came with PR #1453, 2022-01-20), in the parameters' dtype (fp16; ``allreduce_always_fp32`` off),
      on the same process group (one NCCL stream), and waited for by the next fetch's synchronize;
    - DeepSpeed's own Python builds the per-rank lists, one eager tensor call per rank and list entry, on the
      host while the device waits (the gather loop runs after the synchronize): ``_allgather_param`` one
      ``narrow`` per rank, ``_reduce_scatter_gradient`` a ``view`` and a ``narrow`` per rank. Not charged,
      for want of a published per-call cost: ``torch.distributed.get_rank(group=...)`` called for every rank
      in ``_allgather_param``'s loop, the per-rank list checks of ``torch.distributed.all_gather``, and the
      stream synchronisation of ``param.data = torch.ones(1).to(device)`` at every release (``_partition_param``);
    - v0.3.15 (2021-04-19, ZeRO-Infinity PR #976) to v0.5.x (PR #1453 removed it) also formats
      ``param.norm()`` into a debug string for every parameter at every sub-module fetch (``fetch_sub_module``;
      the f-string is built before ``print_rank_0`` discards it): one read of every weight per fetch plus a
      device sync, ~0.5 s per step for GPT-3 175B. Not charged: if Table 2's runs predate arXiv 2104.04473
      v1 (2021-04-09), they ran v0.3.14 (2021-04-08) or older, without it;
    - the persistent tensors (the small ones: LayerNorm weights and biases, linear biases) are released after
      every backward (``_partition_all_parameters``) and re-gathered after every optimizer step
      (``_post_step``: ``_allgather_params``): one list all_gather of all their partitions, then for each
      persistent tensor and each rank a ``narrow``, a ``view``, a ``narrow`` and a ``copy_`` from Python.
      The same code is in v0.3.13 (March 2021) through v0.4.0 (June 2021); with ~770 persistent tensors in
      GPT-3 175B that is ~1.2M Python iterations per step at 1,536 ranks.
"""

from __future__ import annotations

from collections.abc import Sequence

from slowlink.catalog import Gpu
from slowlink.spec.workload import Model, Workload
from slowlink.units import PRECISION_BYTES
from slowlink.workload.comm import CommCost, groups_of
from slowlink.workload.compute import StageCompute
from slowlink.workload.kernels import SHORT_KERNEL_S  # one per rank: the list API's copies
from slowlink.workload.memory import gathered_bytes_per_param, kept_bytes

# DeepSpeed default (deepspeed/runtime/zero/constants.py, 2021): tensors below this many elements are not
# partitioned (stage3_param_persistence_threshold).
DS_PERSISTENCE_NUMEL = 1e5
# Gathers of a weight tensor per micro-batch when nothing is kept between uses (the trace off by one, module
# docstring): forward and backward, plus the recomputed forward under full recomputation.
GATHERS_NO_REUSE = 2
GATHERS_NO_REUSE_RECOMPUTE = 3
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
# HBM bytes one pass moves per byte of its tensor: a fill (``torch.zeros``) writes each byte once; ``copy_`` and
# an in-place elementwise op (``div_``) read each byte and write it back.
FILL_BYTES_PER_BYTE = 1.0
RW_BYTES_PER_BYTE = 2.0


def layer_tensors(m: Model, tp: int) -> list[float]:
    """Elements of each weight matrix of one layer on one GPU, in forward order: QKV, output projection, MLP in
    (gate and up fused, as Megatron stores them), MLP out; for MoE the router and each expert's in/out."""
    h = m.hidden
    up = 2 if m.gated_mlp else 1
    out = [o * i / (tp if split else 1) for o, i, split in m.attention_matrices()]
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


def gather_hbm_bytes(size_bytes: float, ranks: int) -> float:
    """HBM bytes one DeepSpeed 2021 gather of a ``size_bytes`` tensor moves on each GPU besides NCCL's own
    traffic: ``_allgather_param`` zero-fills the flat buffer (``torch.zeros``: S written) and copies its own
    partition into it (S/n read and written); ProcessGroupNCCL's list ``allgather`` gathers into a new flat
    tensor (``newLikeFlat``: an empty tensor, no fill) and copies each of the n slices back into the list
    (S read and written). Sources: module docstring."""
    return size_bytes * (FILL_BYTES_PER_BYTE + RW_BYTES_PER_BYTE * (1.0 + 1.0 / ranks))


def scatter_hbm_bytes(size_bytes: float, ranks: int) -> float:
    """HBM bytes one DeepSpeed 2021 gradient reduce-scatter of a ``size_bytes`` gradient moves on each GPU
    besides NCCL's own traffic: ``average_tensor`` divides the gradient by the world size in place (``div_``:
    S read and written), ProcessGroupNCCL's list ``reduce_scatter`` copies each rank's slice into a new flat
    input (S read and written), ``_partition_gradient`` copies the reduced partition into the fp16 partition
    buffer (S/n read and written). Sources: module docstring."""
    return size_bytes * RW_BYTES_PER_BYTE * (2.0 + 1.0 / ranks)


def post_step_hbm_bytes(size_bytes: float, ranks: int) -> float:
    """HBM bytes ``_allgather_params`` moves besides NCCL's for the persistent tensors (``size_bytes`` in all):
    its flat buffer is ``torch.empty`` (no fill); each persistent partition is copied in (S/n), the list
    ``allgather`` copies the n slices out (S), and the Python loop copies each tensor's n pieces into its
    own ``torch.empty`` tensor (S), every copy read and written."""
    return size_bytes * RW_BYTES_PER_BYTE * (2.0 + 1.0 / ranks)


def post_step_gather_s(w: Workload, cost: CommCost, grp: Sequence[list[int]], layers: int, gpu: Gpu) -> float:
    """Seconds of ``_post_step``'s gather of the persistent tensors: one list all_gather of all of them
    (NCCL time + one copy per rank + its HBM bytes at ``gpu``'s HBM bandwidth), one narrow per rank, then
    4 eager calls per persistent tensor and rank."""
    ranks = len(grp[0])
    small = persistent_tensors(w.model, w.parallel.tp, layers)
    size = sum(small) * kept_bytes(w.training.precision)
    nccl = cost("all_gather", size, grp) + ranks * SHORT_KERNEL_S
    hbm = post_step_hbm_bytes(size, ranks) / gpu.hbm_bw_bytes_s
    return nccl + hbm + host_loop_s(ranks, CALLS_PER_RANK_GATHER + CALLS_PER_RANK_PERSISTENT * len(small))


def gathers_per_microbatch(recompute: bool) -> int:
    """All-gathers of each weight tensor of a layer per micro-batch: forward, backward and, under full
    recomputation, the recomputed forward. DeepSpeed v0.3.14-v0.5.x keeps no gathered tensor between two uses:
    its reuse check reads a trace whose step ids are off by one (module docstring), so the
    ``stage3_max_reuse_distance`` rule never applies."""
    return GATHERS_NO_REUSE_RECOMPUTE if recompute else GATHERS_NO_REUSE


def end_tensors(m: Model, tp: int) -> list[float]:
    """Elements on one GPU of each tensor gathered outside the layers (forward, backward, one reduce-scatter):
    non-gated (Megatron GPT-2/3): the word embedding, tied to the output layer and fetched once per pass with
    the whole model (DeepSpeedExamples Megatron-LM-v1.1.5-ZeRO3 ``gpt2_model.py``), and the learned position
    embedding (s x h, not split by TP); gated (Llama family): input embedding and output layer, untied."""
    word = m.vocab * m.hidden / tp
    if m.gated_mlp:
        return [word, word]
    return [word, float(m.seq_len * m.hidden)]


def deepspeed_2021_step(w: Workload, cost: CommCost, layers: int, micro: int,
                        gpu: Gpu) -> tuple[float, float, float]:
    """(total, exposed seconds, collectives) per step of DeepSpeed 2021 ZeRO-3: per-tensor collectives at the full
    DP size, each paying the collective model's time (ring latency of n-1 steps included), one short kernel per rank
    for the list API, DeepSpeed's per-rank Python loop and the HBM bytes of its fills and copies
    (:func:`gather_hbm_bytes`, :func:`scatter_hbm_bytes`) at ``gpu``'s HBM bandwidth; plus the post-step
    gather of the persistent tensors; none overlaps with compute (module docstring)."""
    p = w.parallel
    dim = "dp_cp" if p.cp > 1 else "dp"
    grp = groups_of(p, dim)
    ranks = len(grp[0])
    w_bytes, g_bytes = kept_bytes(w.training.precision), PRECISION_BYTES[w.training.grad_comm_dtype]
    hbm = gpu.hbm_bw_bytes_s

    def gather(size: float) -> float:
        host = ranks * SHORT_KERNEL_S + host_loop_s(ranks, CALLS_PER_RANK_GATHER)
        return cost("all_gather", size, grp) + host + gather_hbm_bytes(size, ranks) / hbm

    def scatter(size: float) -> float:
        host = ranks * SHORT_KERNEL_S + host_loop_s(ranks, CALLS_PER_RANK_SCATTER)
        return cost("reduce_scatter", size, grp) + host + scatter_hbm_bytes(size, ranks) / hbm

    n_gather = gathers_per_microbatch(w.training.recompute == "full")
    # DeepSpeed compares a tensor's full size (ds_numel) with the persistence threshold
    gathered = [numel for numel in layer_tensors(w.model, p.tp) if numel * p.tp >= DS_PERSISTENCE_NUMEL]
    per_layer = sum(n_gather * gather(numel * w_bytes) + scatter(numel * g_bytes) for numel in gathered)
    end = end_tensors(w.model, p.tp)
    ends = sum(GATHERS_NO_REUSE * gather(numel * w_bytes) + scatter(numel * g_bytes) for numel in end)
    total = micro * (layers * per_layer + ends) + post_step_gather_s(w, cost, grp, layers, gpu)
    calls = micro * (layers * len(gathered) * (n_gather + 1) + len(end) * (GATHERS_NO_REUSE + 1)) + 1
    return total, total, calls


def prefetched_exposed_s(comm_s: float, compute_s: float, layers: int) -> float:
    """Seconds a layer-by-layer prefetch pipeline adds to ``layers`` x ``compute_s``: the first layer's
    communication cannot start earlier, each later one hides behind the previous layer's compute
    (depth-1 prefetch: FSDP forward/backward prefetch; Zhao et al. 2023, Sec. 3.3)."""
    return comm_s + (layers - 1) * max(0.0, comm_s - compute_s)


def reshards_after_forward(w: Workload) -> bool:
    """Whether each FSDP unit frees its gathered parameters after its forward and gathers them again before its
    backward: the stack's ``reshard_after_forward`` (always; never; not_with_pp = torchtitan's default, never
    under pipeline parallelism: catalog/data/stacks.yaml)."""
    rule = w.stack.fields.reshard_after_forward
    return rule == "always" or (rule == "not_with_pp" and w.parallel.pp == 1)


def fsdp_step(w: Workload, cost: CommCost, lc: StageCompute, layers: int, micro: int,
              local_params: float) -> tuple[float, float, float]:
    """(total, exposed seconds, collectives) per step of FSDP-style ZeRO-3: every micro-batch all-gathers each
    layer before its forward and, when the stack reshards after the forward (:func:`reshards_after_forward`), again
    before its backward (recomputation reuses the backward gather), and reduce-scatters its gradients; one
    collective per layer at the full DP size, behind the previous layer's compute; in the backward the gather of
    the next layer and the reduce-scatter of the last share the network."""
    p, o = w.parallel, w.overlap
    grp = groups_of(p, "dp_cp" if p.cp > 1 else "dp")
    per_layer = local_params / max(layers, 1)
    gather = cost("all_gather", per_layer * gathered_bytes_per_param(w), grp)  # FP8 with fp8_param_gather
    scatter = cost("reduce_scatter", per_layer * PRECISION_BYTES[w.training.grad_comm_dtype], grp)
    again = 1.0 if reshards_after_forward(w) else 0.0
    total = micro * layers * ((1.0 + again) * gather + scatter)
    calls = micro * layers * (2.0 + again)
    if not o.param_gather:
        return total, total, calls
    fwd = prefetched_exposed_s(gather, lc.forward_s, layers)
    bwd = prefetched_exposed_s(again * gather + scatter, lc.backward_s, layers)
    return total, micro * (fwd + bwd), calls
