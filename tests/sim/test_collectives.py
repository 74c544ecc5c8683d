"""Collectives as flows: closed forms, the analytical model on uncontended cases, oversubscription."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from slowlink import units
from slowlink.collectives.constants import SCALE_UP_EFFICIENCY
from slowlink.collectives.model import predict
from slowlink.sim.collectives import simulate_collective
from slowlink.spec.cluster import Cluster
from slowlink.topology.build import build

RADIX4 = {1: 8, 4: 5}  # switch radix giving 4 down ports per leaf at 1:1 and at 4:1 (floor(r o / (1 + o)))


def test_uncontended_ring_matches_closed_form(make_cluster: Callable[..., Cluster]) -> None:
    c = make_cluster(nodes=8, gpn=8, nics=8, routing="adaptive", switch_radix=32)  # 16 ports down per leaf
    size = 1 * units.GiB
    pred, _ = simulate_collective(c, "all_reduce", size, topo=build(c), algorithm="ring")
    nic = c.compute_nics.speed_bytes_s * c.fabric.transport.efficiency
    # 2(n-1) steps of size/n; a node boundary has 8 rails (8 x nic), a hop inside a node NVLink at the
    # model's efficiency. Per step: the bandwidth bound + the mean hop latency round the ring: 56 NVLink
    # hops (the link latency), 8 network hops (transport latency + 2 switch crossings, + 2 more for the
    # 4 of them that go leaf -> spine -> leaf; 2 nodes per leaf of 16 ports).
    bw = min(c.scale_up.bw_bytes_s * SCALE_UP_EFFICIENCY, 8 * nic)
    sw, tr = c.fabric.switch_latency_s, c.fabric.transport.latency_s
    hop = (56 * c.scale_up.link.latency_s + 4 * (tr + 2 * sw) + 4 * (tr + 4 * sw)) / 64
    closed = 2 * (c.gpus - 1) * (size / c.gpus / bw + hop)
    assert abs(pred.time_s - closed) / closed < 1e-6


@pytest.mark.parametrize(("op", "nodes", "gpn", "nics"), [
    ("all_reduce", 8, 8, 8), ("all_gather", 8, 8, 8), ("reduce_scatter", 4, 8, 1),
    ("all_to_all", 8, 1, 1), ("send_recv", 2, 8, 8)])
def test_uncontended_symmetric_agrees_with_the_analytical_model_within_5_percent(
        op: str, nodes: int, gpn: int, nics: int, make_cluster: Callable[..., Cluster]) -> None:
    # Bandwidth-bound size: the model's latency and pipeline-fill terms are < 3% of its time here.
    c = make_cluster(nodes=nodes, gpn=gpn, nics=nics, routing="adaptive")
    size = 8 * units.GiB
    ana = predict(c, op, size, algorithm="ring" if op != "all_to_all" and op != "send_recv" else None,
                  protocol="Simple")
    ranks = [0, c.gpus - 1] if op == "send_recv" else None
    flow, _ = simulate_collective(c, op, size, ranks, build(c), algorithm=ana.algorithm)
    assert abs(flow.time_s - ana.time_s) / ana.time_s < 0.05, (flow.time_s, ana.time_s)


def test_all_to_all_at_4_to_1_is_about_twice_the_1_to_1_case(make_cluster: Callable[..., Cluster]) -> None:
    """8 hosts, 2 leaves of 4 NICs (radix 8 at 1:1, 5 at 4:1); at 4:1 a leaf's uplinks total one NIC line rate.

    Each host sends size/8 to each of the 7 others; 4/8 of its bytes leave its leaf. At 1:1 the NIC
    (line x efficiency e) bounds: T1 = (7/8) size / (e line). At 4:1 the leaf's uplinks (4 line / 4)
    carry 4 hosts x (1/2) size: T4 = 2 size / line. T4 / T1 = 2 x (8/7) x e = 2.15 for e = 0.94.
    """
    t = {}
    for o in (1, 4):
        c = make_cluster(oversubscription=o, nodes=8, gpn=1, nics=1, routing="adaptive", switch_radix=RADIX4[o])
        t[o] = simulate_collective(c, "all_to_all", 1 * units.GiB, topo=build(c))[0].time_s
    e = make_cluster(nodes=8, gpn=1, nics=1).fabric.transport.efficiency
    assert abs(t[4] / t[1] - 2 * 8 / 7 * e) < 0.01
    assert abs(t[4] / t[1] - 2.0) / 2.0 < 0.10


def test_collective_inside_one_leaf_unchanged_by_oversubscription(make_cluster: Callable[..., Cluster]) -> None:
    t = []
    for o in (1, 4):
        c = make_cluster(oversubscription=o, nodes=8, gpn=1, nics=1, switch_radix=RADIX4[o])
        t.append(simulate_collective(c, "all_to_all", units.GiB, ranks=[0, 1, 2, 3], topo=build(c))[0].time_s)
    assert abs(t[0] - t[1]) / t[0] < 1e-9


def test_ring_crosses_each_leaf_boundary_once_so_4_to_1_does_not_bind(make_cluster: Callable[..., Cluster]) -> None:
    # A ring over 2 leaves of 4 hosts crosses the cut with one flow each way: 1 NIC's worth of traffic on
    # a leaf uplink capacity of 4 line / 4 = 1 line > e line. The ring is NIC-bound either way.
    t = []
    for o in (1, 4):
        c = make_cluster(oversubscription=o, nodes=8, gpn=1, nics=1, routing="adaptive", switch_radix=RADIX4[o])
        t.append(simulate_collective(c, "all_reduce", units.GiB, topo=build(c), algorithm="ring")[0].time_s)
    assert abs(t[1] / t[0] - 1) < 1e-9


def test_ecmp_is_never_faster_than_spraying_and_seed_is_deterministic(make_cluster: Callable[..., Cluster]) -> None:
    res = {}
    for routing in ("ecmp", "adaptive"):
        c = make_cluster(nodes=8, gpn=1, nics=1, routing=routing, ecmp_seed=3, switch_radix=4)
        res[routing] = simulate_collective(c, "all_to_all", units.GiB, topo=build(c))[0].time_s
    assert res["ecmp"] >= res["adaptive"] * (1 - 1e-9)
    c = make_cluster(nodes=8, gpn=1, nics=1, routing="ecmp", ecmp_seed=3, switch_radix=4)
    a = simulate_collective(c, "all_to_all", units.GiB, topo=build(c))[1]
    b = simulate_collective(c, "all_to_all", units.GiB, topo=build(c))[1]
    assert (a.finish_s == b.finish_s).all()


def test_algorithm_follows_the_analytical_pick(make_cluster: Callable[..., Cluster]) -> None:
    c = make_cluster(nodes=8, gpn=8, nics=8)
    for size in (64 * units.KiB, 1 * units.GiB):
        assert simulate_collective(c, "all_reduce", size)[0].algorithm == predict(c, "all_reduce", size).algorithm


def test_unsimulated_op_is_a_value_error(make_cluster: Callable[..., Cluster]) -> None:
    with pytest.raises(ValueError, match="not simulated"):
        simulate_collective(make_cluster(), "broadcast", units.MiB)
