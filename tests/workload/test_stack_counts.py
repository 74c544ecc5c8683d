"""Collectives per step by stack: on one small case (Llama 3 8B, 8,030,519,296 parameters, on the 64 H100s of
examples/ref-64gpu.yaml, tp 1, pp 1, dp 64, global batch 128: two micro-batches) each stack's DP count equals the
count worked out by hand from its source (catalog/data/stacks.yaml), and the workload's stack: is checked. DP's count
holds the step's synchronising all-reduces too (workload.step_sync): the gradient norm's over each of the stack's
groups larger than one rank, and the loss's in each micro-batch where the stack reduces it (Megatron-LM, NeMo)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slowlink.errors import SpecError
from slowlink.spec.cluster import load_cluster
from slowlink.spec.workload import Workload, workload_from_mapping
from slowlink.workload.step import plan

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = load_cluster(ROOT / "examples" / "ref-64gpu.yaml")
PARAMS = 8_030_519_296  # Llama 3 8B: 32 layers of 218,112,000 + 2 x 525,336,576 (embeddings) + 4,096 (final norm)


def _dp_calls(stack: object, zero: int, **overlap: bool) -> float:
    w = workload_from_mapping({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 128, "micro_batch": 1},
                               "parallel": {"tp": 1, "pp": 1, "dp": 64, "zero": zero}, "overlap": overlap,
                               "stack": stack}, "w.yaml")
    return plan(w, CLUSTER, check_memory=False).collectives_per_step["dp"]


@pytest.mark.parametrize(("stack", "zero", "calls"), [
    # Megatron-Core: max(40M, 1M x 64) = 64M parameters per bucket; ceil(8.03e9 / 64e6) = 126 buckets, each
    # reduce-scattered and all-gathered by the distributed optimizer; the loss all-reduced over DP in each of the 2
    # micro-batches and the norm once over every rank (the distributed optimizer's grad-stats group)
    ("megatron-core", 1, 2 * 126 + 2 + 1),
    # NeMo's callback: 134,217,728 parameters; ceil(8.03e9 / 134.2e6) = 60, twice; loss and norm as Megatron's
    ("nemo", 1, 2 * 60 + 2 + 1),
    # DeepSpeed ZeRO-1: reduce_bucket_size and allgather_bucket_size 5e8; ceil(8.03e9 / 5e8) = 17, twice; the norm
    # over DP (its model-parallel all-reduce has one rank at tp 1, pp 1)
    ("deepspeed", 1, 2 * 17 + 1),
    # torchtitan's DDP (zero 0): 100 MiB of bf16 gradients = 52,428,800 parameters after a 1 MiB (524,288) first
    # bucket: 1 + 153 full + 1 remainder = 155 all-reduces; the norm's TP and PP all-reduces have one rank each
    ("torchtitan", 0, 155),
    # PyTorch DDP's 25 MiB (13,107,200 parameters) after the same first bucket: 1 + 612 + 1 = 614 all-reduces; the
    # norm is local
    ("fsdp", 0, 614),
    # FSDP1 ZeRO-2 (SHARD_GRAD_OP): one unit per block and one per end, 32 + 2 = 34 reduce-scatters, 34 all-gathers;
    # clip_grad_norm_ all-reduces over the sharding group once
    ("fsdp", 2, 2 * 34 + 1),
    # torchtitan ZeRO-3 without PP: each block gathered before its forward and again before its backward, then
    # reduce-scattered, in each of the 2 micro-batches: 2 x 32 x 3; the norm once over the stage's 64 ranks
    ("torchtitan", 3, 2 * 32 * 3 + 1),
])
def test_dp_collectives_per_step_by_stack(stack: str, zero: int, calls: int) -> None:
    assert _dp_calls(stack, zero) == calls


def test_megatron_without_overlap_reduces_each_buffer_once() -> None:
    # bucket_size None without overlap_grad_reduce: one reduce-scatter and one all-gather (+ 2 loss, 1 norm)
    assert _dp_calls("megatron-core", 1, grad_reduce=False, param_gather=False) == 2 + 3
    # PyTorch DDP keeps its buckets either way
    assert _dp_calls("fsdp", 0, grad_reduce=False) == 614


def test_torchtitan_zero3_under_pp_does_not_reshard() -> None:
    def calls(stack: str) -> float:
        w = workload_from_mapping({"model": {"preset": "llama3-8b"},
                                   "training": {"global_batch": 128, "micro_batch": 1},
                                   "parallel": {"tp": 1, "pp": 2, "dp": 32, "zero": 3}, "stack": stack}, "w.yaml")
        return plan(w, CLUSTER, check_memory=False).collectives_per_step["dp"]

    # 4 micro-batches x 16 layers on a stage: gather + reduce-scatter (torchtitan) or + the backward gather (FSDP2
    # as Megatron-Core runs it); the norm: torchtitan's over a stage's 32 ranks and over PP, Megatron-Core's over all
    # 64, with the loss over DP in each of the 4 micro-batches
    assert calls("torchtitan") == 4 * 16 * 2 + 2
    assert calls("megatron-core") == 4 * 16 * 3 + 1 + 4


def test_more_calls_cost_more_latency() -> None:
    # the same bytes in smaller buckets: every call pays its latency
    def step(bucket: float) -> float:
        w = workload_from_mapping({"model": {"preset": "llama3-8b"},
                                   "training": {"global_batch": 128, "micro_batch": 1},
                                   "parallel": {"tp": 1, "pp": 1, "dp": 64, "zero": 1},
                                   "stack": {"name": "megatron-core", "grad_bucket_params": bucket,
                                             "grad_bucket_params_per_dp": 0}}, "w.yaml")
        return plan(w, CLUSTER, check_memory=False).comm_total_s["dp"]

    assert step(1e6) > step(64e6) > 0.0


def test_tp_calls_per_layer() -> None:
    # SP: 2 blocks x (all-gather + reduce-scatter) x 2 passes (no full recompute) per layer; 32 layers, 2
    # micro-batches; the word embedding (reduce-scatter forward, all-gather backward) and the output layer
    # (all-gather forward, all-gather and reduce-scatter backward): 5 more per micro-batch
    w = workload_from_mapping({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 128, "micro_batch": 1},
                               "parallel": {"tp": 2, "pp": 1, "dp": 32}}, "w.yaml")
    assert plan(w, CLUSTER, check_memory=False).collectives_per_step["tp"] == 4 * (32 * 8 + 5)


@pytest.mark.parametrize(("stack", "parallel", "message"), [
    ("deepspeed", {"pp": 2, "vp": 2, "dp": 32}, "parallel.vp (2) > 1 needs the interleaved pipeline schedule; "
     "stack deepspeed implements 1f1b"),
    ("fsdp", {"pp": 2, "dp": 32}, "parallel.pp (2) > 1 needs a pipeline schedule; stack fsdp implements none"),
    ({"name": "nemo", "grad_bucket_params": -1}, {},
     "w.yaml: stack.grad_bucket_params (-1): Input should be greater than 0"),
    ({"name": "torchtitan", "sharded_unit": "tensor"}, {}, "sharded_unit ('tensor')"),
    ({"name": "megatron", "grad_bucket_params": 1e8}, {}, "did you mean megatron-core"),
])
def test_bad_stacks_are_refused(stack: object, parallel: dict[str, int], message: str) -> None:
    with pytest.raises(SpecError) as exc:
        workload_from_mapping({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 128},
                               "parallel": {"tp": 1, **parallel}, "stack": stack}, "w.yaml")
    assert message in str(exc.value)


def _moe(micro_batch: int, global_batch: int, ep_comm: bool) -> Workload:
    return workload_from_mapping({"model": {"preset": "mixtral-8x7b"},
                                  "training": {"global_batch": global_batch, "micro_batch": micro_batch},
                                  "parallel": {"tp": 1, "pp": 4, "dp": 16, "ep": 8}, "overlap": {"ep_comm": ep_comm}},
                                 "w.yaml")


def test_ep_overlap_pairs_micro_batches() -> None:
    from slowlink.workload.comm import analytical_cost
    from slowlink.workload.compute import StageCompute
    from slowlink.workload.traffic import ep_layer

    w = _moe(1, 256, True)
    cost = analytical_cost(CLUSTER)
    t = ep_layer(w, cost).total_s
    assert t > 0.0
    # 16 micro-batches: 15 forward/backward pairs, the first forward and the last backward alone
    short, long = StageCompute(0.25 * t, 0.25 * t), StageCompute(t, t)
    assert ep_layer(w, cost, short, 16).exposed_s == pytest.approx((t + 15 * 0.5 * t) / 16)
    assert ep_layer(w, cost, long, 16).exposed_s == pytest.approx(t / 16)
    assert ep_layer(w, cost, long, 16).total_s == t
    assert ep_layer(_moe(1, 256, False), cost, long, 16).exposed_s == t


def test_ep_overlap_is_refused_without_moe_or_a_second_micro_batch() -> None:
    with pytest.raises(SpecError, match=r"overlap.ep_comm \(true\): model llama3-8b has no MoE layers"):
        workload_from_mapping({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 128},
                               "overlap": {"ep_comm": True}}, "w.yaml")
    from slowlink.errors import InfeasiblePlan

    with pytest.raises(InfeasiblePlan, match=r"each DP rank runs 1 per step .* needs 2 or more") as exc:
        plan(_moe(1, 16, True), CLUSTER, check_memory=False)
    assert exc.value.rule == "ep_overlap_pairs"
