"""flow_cost: the step model's contract (ranks, concurrent groups, send_recv pairs)."""

from __future__ import annotations

from collections.abc import Callable

from slowlink import units
from slowlink.sim.collectives import simulate_collective
from slowlink.sim.step import flow_cost
from slowlink.spec.cluster import Cluster
from slowlink.spec.workload import Parallel
from slowlink.topology.build import build
from slowlink.workload.placement import dimension_groups


def test_one_group_equals_simulate_collective(make_cluster: Callable[..., Cluster]) -> None:
    c = make_cluster(nodes=4, gpn=4, nics=2, switch_radix=4)
    topo = build(c)
    cost = flow_cost(c, topo)
    ranks = list(range(c.gpus))
    alone = simulate_collective(c, "all_gather", units.GiB, ranks, topo)[0].time_s
    assert abs(cost("all_gather", units.GiB, [ranks]) - alone) / alone < 1e-9


def test_concurrent_groups_contend_on_shared_links(make_cluster: Callable[..., Cluster]) -> None:
    # dp groups of a tp 4 x dp 4 layout on 4 nodes with ONE NIC each: the 4 dp rings share every NIC.
    c = make_cluster(nodes=4, gpn=4, nics=1, switch_radix=4)
    cost = flow_cost(c)
    groups = dimension_groups(Parallel.of(tp=4, dp=4), "dp")
    one, four = cost("reduce_scatter", units.GiB, groups[:1]), cost("reduce_scatter", units.GiB, groups)
    assert 3.5 < four / one <= 4.0 + 1e-9


def test_identical_tp_groups_inside_nodes_cost_one_group(make_cluster: Callable[..., Cluster]) -> None:
    c = make_cluster(nodes=64, gpn=8, nics=8)
    cost = flow_cost(c)
    groups = dimension_groups(Parallel.of(tp=8, dp=64), "tp")
    assert abs(cost("all_gather", units.MiB * 64, groups) - cost("all_gather", units.MiB * 64, groups[:1])) < 1e-12


def test_send_recv_pairs_and_empty_inputs(make_cluster: Callable[..., Cluster]) -> None:
    c = make_cluster(nodes=2, gpn=4, nics=4)
    cost = flow_cost(c)
    pairs = [[i, i + 4] for i in range(4)]
    t = cost("send_recv", units.GiB, pairs)
    nic = c.compute_nics.speed_bytes_s * c.fabric.transport.efficiency
    assert units.GiB / nic < t < 1.01 * units.GiB / nic + 1e-4
    assert cost("send_recv", 0.0, pairs) == 0.0
    assert cost("all_reduce", units.GiB, [[3]]) == 0.0


def test_a_size_a_power_of_two_away_reuses_the_drains_exactly(make_cluster: Callable[..., Cluster]) -> None:
    # FP8 gradients or a doubled micro-batch (advice) price the same groups at half or twice the size: the reused
    # drains give the very number a fresh simulation gives
    c = make_cluster(nodes=16, gpn=4, nics=2, switch_radix=4, tiers=3, oversubscription=[1, 1, 2])
    p = Parallel.of(tp=2, pp=4, dp=8)
    pp = dimension_groups(p, "pp")
    pairs = [[g[i], g[i + 1]] for g in pp for i in range(len(g) - 1)]
    for op, groups in (("reduce_scatter", dimension_groups(p, "dp")), ("all_gather", dimension_groups(p, "tp")),
                       ("send_recv", pairs), ("all_to_all", dimension_groups(p, "dp"))):
        warm = flow_cost(c)
        warm(op, 3 * units.MiB, groups)
        for scale in (0.5, 2.0, 4.0, 3.0):
            assert warm(op, 3 * units.MiB * scale, groups) == flow_cost(c)(op, 3 * units.MiB * scale, groups)
