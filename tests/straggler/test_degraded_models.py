"""One degraded part, seen the same way by the analytical model and the flow simulator."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from slowlink.collectives import predict
from slowlink.errors import SpecError
from slowlink.sim.step import flow_cost
from slowlink.spec.cluster import Cluster, cluster_from_mapping
from slowlink.spec.workload import Workload, workload_from_mapping
from slowlink.straggler.degraded import degraded_cost, healthy
from slowlink.topology.build import build
from slowlink.topology.degraded import paced_gpu
from slowlink.workload.comm import analytical_cost

GPN = 8


def _cluster(degraded: list[dict[str, Any]]) -> Cluster:
    return cluster_from_mapping({
        "name": "t", "nodes": 4, "gpus_per_node": GPN, "gpu": "h100-sxm",
        "scale_up": {"link": "nvlink4", "domain_gpus": GPN},
        "nics": {"compute": {"per_node": GPN, "speed_gbit_s": 400}},
        "fabric": {"transport": "infiniband", "tiers": 2, "switch_radix": 16}, "degraded": degraded})


SLOW = [{"node": 2, "nic": 0, "rate": 0.5}]
DP0 = [[n * GPN for n in range(4)]]           # local GPU 0 of every node: crosses node 2's NIC 0
DP1 = [[n * GPN + 1 for n in range(4)]]       # local GPU 1: never touches NIC 0
SIZE = 1 << 30


def test_topology_halves_the_nic_both_ways() -> None:
    c = _cluster(SLOW)
    topo, base = build(c), build(healthy(c))
    e = 2 * GPN + 0
    for link in (topo.nic_up[e], topo.nic_down[e]):
        assert topo.capacity_bytes_s[link] == pytest.approx(base.capacity_bytes_s[link] * 0.5)
    assert topo.capacity_bytes_s[topo.nic_up[e + 1]] == base.capacity_bytes_s[base.nic_up[e + 1]]


@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "all_to_all"])
def test_both_models_slow_only_the_group_that_crosses_the_part(op: str) -> None:
    c = _cluster(SLOW)
    h = healthy(c)
    for cost_of in (analytical_cost, flow_cost):
        slow, fast = cost_of(c), cost_of(h)
        assert slow(op, SIZE, DP1) == pytest.approx(fast(op, SIZE, DP1))
        ratio = slow(op, SIZE, DP0) / fast(op, SIZE, DP0)
        assert 1.8 < ratio <= 2.0 + 1e-9, (cost_of.__name__, ratio)
    ana = analytical_cost(c)(op, SIZE, DP0) / analytical_cost(h)(op, SIZE, DP0)
    flow = flow_cost(c)(op, SIZE, DP0) / flow_cost(h)(op, SIZE, DP0)
    assert ana == pytest.approx(flow, rel=0.02)


def test_prediction_names_the_part() -> None:
    c = _cluster(SLOW)
    pred = predict(c, "all_reduce", SIZE)  # every GPU: the rings over NIC 0 are paced by node 2's
    assert "node 2 NIC 0 at 50%" in pred.bottleneck
    assert "degraded node 2 NIC 0" in pred.reason
    assert pred.time_s > predict(healthy(c), "all_reduce", SIZE).time_s * 1.5


def test_delayed_node_adds_latency_in_both_models() -> None:
    c = _cluster([{"node": 1, "delay_ms": 5.0}])
    h = healthy(c)
    small = 4096.0
    for cost_of in (analytical_cost, flow_cost):
        extra = cost_of(c)("all_reduce", small, DP0) - cost_of(h)("all_reduce", small, DP0)
        # 2 (n - 1) ring steps of 4 hops: the chain passes node 1 twice per round, +2 x 5 ms per round
        assert 0.010 < extra < 0.035, (cost_of.__name__, extra)
        assert cost_of(c)("all_to_all", small, DP0) - cost_of(h)("all_to_all", small, DP0) == \
            pytest.approx(0.005, rel=0.2)


def test_slow_gpu_paces_compute_and_fabric_link_slows_flow() -> None:
    c = _cluster([{"node": 1, "gpu": 3, "clock": 0.8}])
    gpu, words = paced_gpu(c)
    assert gpu.peak("bf16") == pytest.approx(0.8 * c.gpu.peak("bf16")) and "node 1 GPU 3" in words
    assert paced_gpu(healthy(c))[0] is c.gpu
    topo = build(healthy(c))
    link = next(n for n in topo.names if n.startswith("leaf:0->"))
    slow = replace(c, degraded=_cluster([{"link": link, "rate": 0.5}]).degraded)
    i = topo.names.index(link)
    assert build(slow).capacity_bytes_s[i] == pytest.approx(topo.capacity_bytes_s[i] * 0.5)


def test_unknown_link_is_a_spec_error() -> None:
    c = _cluster([{"link": "leaf:99->spine:0", "rate": 0.5}])
    with pytest.raises(SpecError, match=r"degraded.link \('leaf:99->spine:0'\) is not a link of the fabric"):
        build(c)


def _llama8b() -> Workload:
    return workload_from_mapping({
        "model": {"preset": "llama3-8b", "seq_len": 4096},
        "training": {"global_batch": 64, "micro_batch": 1, "precision": "bf16", "recompute": "selective"},
        "parallel": {"tp": 8, "pp": 1, "dp": "auto", "zero": 1, "sequence_parallel": True}})


def test_degraded_cost_per_part_and_unpriced_cable() -> None:
    topo = build(_cluster([]))
    cable = next(n for n in topo.names if n.startswith("leaf:0->spine"))
    c = _cluster([{"node": 2, "nic": 0, "rate": 0.5}, {"node": 1, "gpu": 0, "clock": 0.5},
                  {"link": cable, "rate": 0.5}])
    w = _llama8b()
    ana = degraded_cost(w, c, "analytical")
    assert [p.part for p in ana.parts] == list(c.degraded.names)
    nic, gpu, link = ana.parts
    assert nic.slowdown > 0 and gpu.slowdown > nic.slowdown  # every rank waits for the half-clock GPU
    assert link.slowdown == 0 and ana.unpriced == (f"link {cable}",)
    assert ana.pays == "compute" and ana.exposed_delta_s["compute"] > 0
    flow = degraded_cost(w, c, "flow")
    assert flow.unpriced == () and flow.parts[2].slowdown >= 0
    # the healthy steps differ (TP inside the node), what the parts add does not
    added = [x.degraded.step_time_s - x.healthy.step_time_s for x in (ana, flow)]
    assert added[1] == pytest.approx(added[0], rel=0.05)
