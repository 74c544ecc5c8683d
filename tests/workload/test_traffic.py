"""Exposure rules of workload/traffic.py: the SM contention of communication hidden behind compute, what a
pipeline hand-off sends, and the DP traffic a step waits for under Megatron-Core's interleaved schedule."""

from __future__ import annotations

from pathlib import Path

import pytest

from slowlink.collectives.constants import CHANNELS
from slowlink.errors import SpecError
from slowlink.spec.cluster import load_cluster
from slowlink.spec.workload import Workload, workload_from_mapping
from slowlink.workload.buckets import last_bucket_params
from slowlink.workload.comm import CommCost
from slowlink.workload.compute import StageCompute
from slowlink.workload.memory import vocab_shard_params
from slowlink.workload.traffic import (
    chunked_gather_exposed_s,
    chunked_reduce_exposed_s,
    comm_sm_share,
    dp_step,
    micro_batch_act_bytes,
    overlap_contention_s,
    pp_microbatch,
)


def test_a_collective_holds_one_sm_per_channel() -> None:
    assert CHANNELS == 24  # the HGX A100 NCCL log the share is sourced from
    assert comm_sm_share(108) == pytest.approx(24 / 108)  # A100
    assert comm_sm_share(132) == pytest.approx(24 / 132)  # H100
    assert comm_sm_share(8) == 1.0  # never more than the whole GPU


def test_compute_longer_than_the_collective_loses_the_share_of_its_duration() -> None:
    assert overlap_contention_s(1.0, 10.0, 0.25) == pytest.approx(0.25)


def test_a_collective_longer_than_the_slowed_compute_adds_nothing() -> None:
    assert overlap_contention_s(10.0, 1.0, 0.25) == 0.0  # 1 s of compute at 75% ends at 1.33 s, long before


def test_between_the_two_the_window_ends_when_the_slowed_compute_does() -> None:
    # comm 4 s beside 3.5 s of compute at 75% speed: 3 s done at 4 s, the last 0.5 s at full speed
    assert overlap_contention_s(4.0, 3.5, 0.25) == pytest.approx(0.5)


def test_nothing_overlapped_costs_nothing() -> None:
    assert overlap_contention_s(0.0, 5.0, 0.25) == 0.0
    assert overlap_contention_s(5.0, 0.0, 0.25) == 0.0


def _pp_w(sp: bool, scatter_gather: bool) -> Workload:
    return workload_from_mapping({
        "model": {"preset": "llama3-8b"}, "training": {"global_batch": 64, "micro_batch": 1},
        "parallel": {"tp": 4, "pp": 2, "dp": 2, "sequence_parallel": sp, "pp_scatter_gather": scatter_gather}},
        "w.yaml")


def _priced() -> tuple[list[tuple[str, float]], CommCost]:
    calls: list[tuple[str, float]] = []

    def cost(op: str, size_bytes: float, groups: list[list[int]]) -> float:
        calls.append((op, size_bytes))
        return size_bytes * (1e-9 if op == "send_recv" else 1e-10)

    return calls, cost


def test_without_sp_megatron_scatters_a_slice_and_all_gathers_it_on_receipt() -> None:
    calls, cost = _priced()
    w = _pp_w(False, True)
    full = micro_batch_act_bytes(w)
    d = pp_microbatch(w, cost)
    assert calls == [("send_recv", full / 4), ("all_gather", full)]
    assert d.exposed_s == pytest.approx(2 * (full / 4 * 1e-9 + full * 1e-10))


def test_without_scatter_gather_every_tp_rank_sends_the_whole_tensor() -> None:
    calls, cost = _priced()
    w = _pp_w(False, False)
    full = micro_batch_act_bytes(w)
    d = pp_microbatch(w, cost)
    assert calls == [("send_recv", full)]
    assert d.exposed_s == pytest.approx(2 * full * 1e-9)
    assert d.size_bytes == full


def test_with_sp_the_slice_is_already_1_over_tp_either_way() -> None:
    for scatter_gather in (True, False):
        calls, cost = _priced()
        w = _pp_w(True, scatter_gather)
        pp_microbatch(w, cost)
        assert calls == [("send_recv", micro_batch_act_bytes(w) / 4)]


def _vp_w(pp_comm: bool) -> Workload:
    return workload_from_mapping({
        "model": {"preset": "llama3-8b"}, "training": {"global_batch": 64, "micro_batch": 1},
        "parallel": {"tp": 4, "pp": 2, "dp": 2, "vp": 4}, "overlap": {"pp_comm": pp_comm}}, "w.yaml")


def test_overlapped_pp_hop_waits_only_for_what_outlasts_the_next_chunk() -> None:
    # Megatron's interleaved schedule with overlap_p2p_comm: the forward hop beside one backward chunk, the
    # backward hop beside one forward chunk; hop = size x 1e-9 s here
    _, cost = _priced()
    w = _vp_w(True)
    hop = micro_batch_act_bytes(w) / 4 * 1e-9
    wide = pp_microbatch(w, cost, StageCompute(2 * hop, 4 * hop))
    assert wide.total_s == pytest.approx(2 * 4 * hop)  # what moves does not change
    assert wide.exposed_s == 0.0
    # forward chunk 0.25 hop: the backward hop waits 0.75 hop; backward chunk 0.5 hop: the forward hop 0.5 hop
    part = pp_microbatch(w, cost, StageCompute(0.25 * hop, 0.5 * hop))
    assert part.exposed_s == pytest.approx(4 * (0.75 + 0.5) * hop)
    # without the key (Megatron's default, batch_p2p_comm) every hop is waited for
    assert pp_microbatch(_vp_w(False), cost, StageCompute(2 * hop, 4 * hop)).exposed_s == pytest.approx(8 * hop)


def test_pp_comm_needs_the_interleaved_schedule() -> None:
    with pytest.raises(SpecError, match=r"w.yaml: overlap.pp_comm \(true\): needs the interleaved schedule, "
                                        r"parallel.vp \(1\) > 1"):
        workload_from_mapping({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 64},
                               "parallel": {"tp": 4, "pp": 2, "dp": 2}, "overlap": {"pp_comm": True}}, "w.yaml")


def test_one_chunk_reduction_hides_behind_the_last_backward_but_its_last_bucket() -> None:
    # vp = 1: max(reduction - backward, last bucket), the rule before interleaving was modelled
    assert chunked_reduce_exposed_s([5.0], 1.0, 3.0, 4) == pytest.approx(2.0)
    assert chunked_reduce_exposed_s([5.0], 1.0, 10.0, 4) == pytest.approx(1.0)


def test_interleaved_chunks_reduce_one_after_another_from_their_last_backward() -> None:
    # pp 2, chunk backward 1 s: chunk 2 ready at -4 s, chunk 1 at -2 s, chunk 0's buckets from -1 s
    # chunk 2: -4..-2; chunk 1: -2..0; chunk 0 but its last bucket: 0..2; the last bucket 2..3
    assert chunked_reduce_exposed_s([3.0, 2.0, 2.0], 1.0, 1.0, 2) == pytest.approx(3.0)
    # short reductions: each chunk's hides behind the backwards after it; only the last bucket is left
    assert chunked_reduce_exposed_s([1.0, 1.0, 1.0], 0.5, 1.0, 2) == pytest.approx(0.5)


def test_the_first_forward_waits_for_chunk_0s_whole_gather() -> None:
    # pp 2, chunk forward 1 s: chunk 1's gather (2..3) ends before its first forward (4), chunk 2's (4..5) before
    # its own (6): only chunk 0's 2 s delay the step
    assert chunked_gather_exposed_s([2.0, 1.0, 1.0], 1.0, 2) == pytest.approx(2.0)
    # chunk 1's 5 s gather (2..7) delays its first forward to 7 (3 s more); chunk 2 (7..8) is then in time
    assert chunked_gather_exposed_s([2.0, 5.0, 1.0], 1.0, 2) == pytest.approx(5.0)


MEGATRON_BUCKET_PARAMS = 40e6  # megatron-core's bucket at dp x cp <= 40 (catalog/data/stacks.yaml)


def test_the_last_bucket_holds_the_word_embedding_whole() -> None:
    w = _dp_w(zero=1, vp=1)
    emb = vocab_shard_params(w)
    assert emb == 128256 / 4 * 4096  # llama3-8b at TP 4: 131M, more than Megatron's 40M bucket
    assert last_bucket_params(w, 1e12) == MEGATRON_BUCKET_PARAMS  # max(40M, 1M x 2): 40M
    assert last_bucket_params(w, 1e12, emb) == emb
    assert last_bucket_params(w, 1e6, emb) == 1e6  # never more than the GPU holds


def _dp_w(zero: int, vp: int, pp: int = 2) -> Workload:
    return workload_from_mapping({
        "model": {"preset": "llama3-8b"}, "training": {"global_batch": 64, "micro_batch": 1},
        "parallel": {"tp": 4, "pp": pp, "dp": 2, "vp": vp, "zero": zero},
        "overlap": {"grad_reduce": True, "param_gather": True}}, "w.yaml")


_GPU = load_cluster(Path(__file__).parents[2] / "examples" / "ref-64gpu.yaml").gpu  # unused below ZeRO 3


def _by_size(op_s: dict[str, float]) -> CommCost:
    def cost(op: str, size_bytes: float, groups: list[list[int]]) -> float:
        return size_bytes * op_s.get(op, 0.0)

    return cost


def test_interleaving_hides_more_of_the_reduction_than_one_backward() -> None:
    # 16 layers on the stage, 4 chunks of 4; a reduction of 2 GB/s-ish against 1 ms backward per layer
    cost = _by_size({"reduce_scatter": 1e-11, "all_gather": 0.0})
    lc = StageCompute(0.0, 1e-3)
    one = dp_step(_dp_w(1, 1), cost, lc, 16, 8, _GPU)
    four = dp_step(_dp_w(1, 4), cost, lc, 16, 8, _GPU)
    assert four.total_s == pytest.approx(one.total_s)  # what moves does not change
    emb = vocab_shard_params(_dp_w(1, 4)) * 2 * 1e-11  # bf16 gradients
    assert one.exposed_s >= emb  # the embedding's bucket is waited for whole
    assert emb <= four.exposed_s < one.exposed_s


def test_zero_0_keeps_the_one_chunk_rule() -> None:
    cost = _by_size({"all_reduce": 1e-11})
    lc = StageCompute(0.0, 1e-3)
    d = dp_step(_dp_w(0, 4), cost, lc, 16, 8, _GPU)
    bucket = MEGATRON_BUCKET_PARAMS * 2 * 1e-11
    assert d.exposed_s == pytest.approx(max(d.total_s - 16 * 1e-3, bucket))


def _tp_w(sp: bool, fused_gate_up: bool, preset: str = "llama3-8b", recompute: str = "none") -> Workload:
    return workload_from_mapping({
        "model": {"preset": preset},
        "training": {"global_batch": 64, "micro_batch": 1, "fused_gate_up": fused_gate_up, "recompute": recompute},
        "parallel": {"tp": 4, "pp": 1, "dp": 2, "sequence_parallel": sp}}, "w.yaml")


def _unit_cost(op: str, size: float, grp: list[list[int]]) -> float:
    return {"all_reduce": 1.0, "all_gather": 0.5, "reduce_scatter": 0.5}[op]


@pytest.mark.parametrize("recompute", ["none", "full"])
def test_split_gate_and_up_linears_all_reduce_the_mlp_input_gradient_twice(recompute: str) -> None:
    """Aleph Alpha's scaling: dense_in and siglu_weight each mark their input for a backward all-reduce without
    SP: one all-reduce a layer more than a fused fc1 (2 blocks x 2 or 3 passes), the recomputed forward none."""
    from slowlink.workload.traffic import split_gate_up_allreduces, tp_layer

    passes = 3 if recompute == "full" else 2
    fused, split = (tp_layer(_tp_w(False, f, recompute=recompute), _unit_cost) for f in (True, False))
    assert fused.total_s == fused.exposed_s == 2 * passes
    assert split.total_s == split.exposed_s == 2 * passes + 1
    assert split_gate_up_allreduces(_tp_w(False, False)) == 1


def test_with_sp_or_an_ungated_mlp_the_split_adds_nothing() -> None:
    from slowlink.workload.traffic import split_gate_up_allreduces, tp_layer

    assert split_gate_up_allreduces(_tp_w(True, False)) == 0  # the norm gathers once, reduce-scatters once
    assert tp_layer(_tp_w(True, False), _unit_cost) == tp_layer(_tp_w(True, True), _unit_cost)
    assert split_gate_up_allreduces(_tp_w(False, False, preset="gpt3-175b")) == 0  # no gate
