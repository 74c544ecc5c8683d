"""The word embedding's and the output layer's TP collectives (traffic.edge_tp) and what the step pays for them."""

from __future__ import annotations

import pytest

from slowlink.catalog import load_catalog
from slowlink.spec.cluster import cluster_from_mapping
from slowlink.spec.workload import Workload, workload_from_mapping
from slowlink.workload.comm import CommCost
from slowlink.workload.compute import Gemm, gemm_time_s
from slowlink.workload.schedule import stage_layers
from slowlink.workload.step import plan
from slowlink.workload.traffic import edge_tp, micro_batch_act_bytes, tp_layer

H100 = load_catalog([]).gpu("h100-sxm")
SLOW = {"all_gather": 30e-3, "reduce_scatter": 50e-3, "all_reduce": 70e-3}  # seconds, longer than any GEMM below


def _w(tp: int = 4, sp: bool = True, pp: int = 1, dp: int = 2, cross_entropy: str = "megatron") -> Workload:
    return workload_from_mapping({
        "model": {"preset": "llama3-8b"},
        "training": {"global_batch": 64, "micro_batch": 1, "cross_entropy": cross_entropy},
        "parallel": {"tp": tp, "pp": pp, "dp": dp, "sequence_parallel": sp}}, "w.yaml")


def _cost(table: dict[str, float]) -> tuple[list[tuple[str, float]], CommCost]:
    calls: list[tuple[str, float]] = []

    def cost(op: str, size_bytes: float, groups: list[list[int]]) -> float:
        calls.append((op, size_bytes))
        return table.get(op, 0.0)  # other ops (PP send/recv) free

    return calls, cost


def _gemms(w: Workload) -> tuple[float, float]:
    dgrad, wgrad = Gemm(w.micro_batch_tokens, w.model.vocab / w.parallel.tp, w.model.hidden).backward()
    return gemm_time_s(dgrad, H100, "bf16"), gemm_time_s(wgrad, H100, "bf16")


def test_with_sp_the_embedding_reduce_scatters_and_gathers_back_and_the_output_layer_gathers_its_input() -> None:
    w = _w()
    calls, cost = _cost(SLOW)
    e = edge_tp(w, cost, H100)
    dgrad, wgrad = _gemms(w)
    assert {size for _, size in calls} == {micro_batch_act_bytes(w)}
    assert e.embedding_s == pytest.approx(50e-3 + 30e-3)
    # forward gather blocking; backward gather beside the data-gradient GEMM, reduce-scatter beside the weight one
    assert e.output_s == pytest.approx(30e-3 + (30e-3 - dgrad) + (50e-3 - wgrad))
    assert e.output_deferred_s == pytest.approx(30e-3 + 50e-3)  # no weight gradient to hide behind
    assert e.total_s == pytest.approx(50e-3 + 30e-3 + 2 * 30e-3 + 50e-3)


def test_collectives_shorter_than_their_gemms_leave_only_the_blocking_ones() -> None:
    w = _w()
    _, cost = _cost({"all_gather": 1e-6, "reduce_scatter": 1e-6, "all_reduce": 1e-6})
    e = edge_tp(w, cost, H100)
    assert e.output_s == pytest.approx(1e-6)  # the forward all-gather
    assert e.embedding_s == pytest.approx(2e-6)


def test_without_sp_one_all_reduce_each_way() -> None:
    w = _w(sp=False)
    calls, cost = _cost(SLOW)
    e = edge_tp(w, cost, H100)
    _, wgrad = _gemms(w)
    assert {op for op, _ in calls} == {"all_reduce"}
    assert e.embedding_s == pytest.approx(70e-3)  # forward only: its backward moves nothing
    assert e.output_s == pytest.approx(70e-3 - wgrad) and e.output_deferred_s == pytest.approx(70e-3)


def test_tp_1_has_none() -> None:
    _, cost = _cost(SLOW)
    assert edge_tp(_w(tp=1, sp=False), cost, H100).total_s == 0.0


CLUSTER = cluster_from_mapping({
    "name": "c", "nodes": 2, "gpus_per_node": 8, "gpu": "h100-sxm",
    "scale_up": {"link": "nvlink4", "domain_gpus": 8}, "nics": {"compute": {"per_node": 8, "speed_gbit_s": 400}},
    "fabric": {"transport": "infiniband", "topology": "fat-tree", "tiers": 2}}, "c.yaml")


@pytest.mark.parametrize("pp", [1, 2])
def test_the_step_pays_them_on_its_slowest_stage_and_reports_them_as_tp(pp: int) -> None:
    w = _w(tp=4, pp=pp, dp=16 // (4 * pp))
    _, slow = _cost(SLOW)
    _, free = _cost({"all_gather": 0.0, "reduce_scatter": 0.0, "all_reduce": 0.0})
    a, b = plan(w, CLUSTER, slow, check_memory=False), plan(w, CLUSTER, free, check_memory=False)
    micro = 64 // (1 * w.parallel.dp)
    dgrad, wgrad = _gemms(w)
    out = 30e-3 + (30e-3 - dgrad) + (50e-3 - wgrad)
    edge = out + 80e-3 if pp == 1 else out  # pp 2: the last stage (logits) is the slowest; it has no embedding
    layers_tp = micro * max(stage_layers(w)) * tp_layer(w, slow).exposed_s
    assert a.comm_s["tp"] == pytest.approx(layers_tp + micro * edge)
    assert a.step_time_s > b.step_time_s + micro * edge  # + the bubble's share


@pytest.mark.parametrize("sp", [True, False])
def test_a_gathered_loss_all_gathers_the_whole_logits_before_it(sp: bool) -> None:
    """training.cross_entropy gathered (Aleph Alpha's scaling): the output layer's forward all-gathers b*s x V
    logits over TP, blocking, on top of Megatron's collectives."""
    base, w = _w(sp=sp), _w(sp=sp, cross_entropy="gathered")
    calls, cost = _cost(SLOW)
    e, e0 = edge_tp(w, cost, H100), edge_tp(base, _cost(SLOW)[1], H100)
    logits = w.micro_batch_tokens * w.model.vocab * 2
    assert ("all_gather", logits) in calls
    for field in ("output_s", "output_deferred_s", "total_s", "output_fwd_s"):
        assert getattr(e, field) == pytest.approx(getattr(e0, field) + 30e-3), field
    assert e.embedding_s == e0.embedding_s
