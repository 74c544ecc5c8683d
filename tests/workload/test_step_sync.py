"""workload.step_sync: the optimizer step's gradient-norm all-reduces and the per-micro-batch loss all-reduce, each
stack's groups (catalog/data/stacks.yaml), priced as a few-byte all-reduce (its latency) and added to the step."""

from __future__ import annotations

from pathlib import Path

import pytest

from slowlink.errors import SpecError
from slowlink.spec.cluster import load_cluster
from slowlink.spec.workload import Workload, workload_from_mapping
from slowlink.workload.comm import analytical_cost, groups_of
from slowlink.workload.step import plan
from slowlink.workload.step_sync import LOSS_BYTES, NORM_BYTES, norm_dims, step_sync

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = load_cluster(ROOT / "examples" / "ref-64gpu.yaml")


def _w(stack: object, zero: int = 1, **parallel: int) -> Workload:
    return workload_from_mapping({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 128},
                                  "parallel": {"tp": 1, "pp": 1, "dp": 64, "zero": zero, **parallel},
                                  "stack": stack}, "w.yaml")


def test_norm_groups_by_stack_and_zero() -> None:
    # Megatron-Core: the model-parallel group (tp x pp) without the distributed optimizer, every rank with it
    assert norm_dims(_w("megatron-core", 0, tp=2, pp=2, dp=16)) == ("tp_pp",)
    assert norm_dims(_w("megatron-core", 1, tp=2, pp=2, dp=16)) == ("world",)
    # DeepSpeed ZeRO-1/2: DP, then the model-parallel group (one rank at tp 1, pp 1: left out)
    assert norm_dims(_w("deepspeed", 1)) == ("dp_cp",)
    assert norm_dims(_w("deepspeed", 1, tp=2, dp=32)) == ("dp_cp", "tp_pp")
    # torchtitan: a DTensor mesh without pp, then pp; FSDP1 over its sharding group, nothing beside DDP
    assert norm_dims(_w("torchtitan", 3, pp=2, dp=32)) == ("tp_cp_dp", "pp")
    assert norm_dims(_w("fsdp", 2)) == ("dp_cp",) and norm_dims(_w("fsdp", 0)) == ()


def test_the_new_groups_hold_the_right_ranks() -> None:
    # tp 2, dp 2, pp 2 in Megatron's order: rank = tp_i + 2 (dp_i + 2 pp_i)
    p = _w("megatron-core", 1, tp=2, pp=2, dp=2).parallel
    assert groups_of(p, "tp_pp").lists() == [[0, 1, 4, 5], [2, 3, 6, 7]]
    assert groups_of(p, "tp_cp_dp").lists() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert groups_of(p, "world").lists() == [list(range(8))]


def test_each_sync_is_one_few_byte_all_reduce() -> None:
    price = analytical_cost(CLUSTER)
    w = _w("megatron-core")
    s = step_sync(w, price)
    assert (s.norm_calls, s.loss_calls) == (1, 1)
    assert s.norm_s == price("all_reduce", NORM_BYTES, groups_of(w.parallel, "world")) > 0.0
    assert s.loss_s == price("all_reduce", LOSS_BYTES, groups_of(w.parallel, "dp")) > 0.0
    # latency-bound: 4 bytes cost about what 4 KiB do over the same 64 ranks
    assert s.norm_s == pytest.approx(price("all_reduce", 4096.0, groups_of(w.parallel, "world")), rel=0.05)
    none = step_sync(_w("fsdp", 0), price)
    assert (none.norm_s, none.norm_calls, none.loss_s, none.loss_calls) == (0.0, 0, 0.0, 0)


def test_the_step_waits_for_the_norm_and_each_loss() -> None:
    # pp 1: every micro-batch's loss all-reduce and the step's norm add to the step, and count as DP's
    quiet = {"name": "megatron-core", "grad_norm_groups_sharded": [], "loss_syncs_per_micro_batch": 0}
    loud, silent = _w("megatron-core"), _w(quiet)
    sync = step_sync(loud, analytical_cost(CLUSTER))
    a, b = plan(loud, CLUSTER, check_memory=False), plan(silent, CLUSTER, check_memory=False)
    micro = loud.micro_batches
    assert micro == 2
    assert a.step_time_s - b.step_time_s == pytest.approx(sync.norm_s + micro * sync.loss_s, rel=1e-6)
    assert a.comm_s["dp"] - b.comm_s["dp"] == pytest.approx(sync.norm_s + micro * sync.loss_s, rel=1e-6)
    assert a.collectives_per_step["dp"] - b.collectives_per_step["dp"] == 1 + micro


def test_bad_sync_fields_are_refused() -> None:
    with pytest.raises(SpecError, match=r"stack.grad_norm_groups.0 \('mesh'\)"):
        _w({"name": "torchtitan", "grad_norm_groups": ["mesh"]})
    with pytest.raises(SpecError, match=r"stack.loss_syncs_per_micro_batch \(-1\): Input should be greater than or"):
        _w({"name": "nemo", "loss_syncs_per_micro_batch": -1})
