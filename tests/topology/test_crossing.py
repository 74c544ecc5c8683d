"""Crossings: a stage slows a pattern only by the traffic that really crosses it (ring vs all_to_all)."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest

from slowlink.collectives.communicator import communicator, place, ring_crossing, tree_crossing
from slowlink.collectives.nccl_trees import dtree_edges
from slowlink.spec.cluster import Cluster
from slowlink.topology.crossing import (
    NONE,
    _local_time_nodes,
    all_to_all_crossing,
    both_ways_crossing,
    edge_crossing,
)
from slowlink.topology.shape import FabricShape, fabric_shape


def _one_group(c: Cluster) -> list[list[int]]:
    return [list(range(c.gpus))]


def test_ring_pays_a_leaf_only_when_its_channels_outnumber_the_uplinks(make_cluster: Callable[..., Cluster]) -> None:
    # radix 5 at 4:1: 4 ports down. One NIC per node: 4 nodes per leaf, uplink 4 x line / 4 = 1 line, and
    # the ring's 1 crossing channel needs 1 line: the NIC (0.94 line) binds.
    c = make_cluster(nodes=8, gpn=1, nics=1, switch_radix=5, oversubscription=4)
    assert ring_crossing(c, place(c, _one_group(c))) == NONE
    # Two NICs per node: 2 nodes per leaf, uplink 4 x line / 4 = 1 line, but 2 channels (2 lines) cross:
    # the leaf uplinks run the ring at 1 / (2 x 0.94) of its NIC rate.
    c2 = make_cluster(nodes=8, gpn=2, nics=2, switch_radix=5, oversubscription=4)
    x = ring_crossing(c2, place(c2, _one_group(c2)))
    assert x.stage == 0 and x.ratio == 4
    assert x.factor == pytest.approx(2 * c2.fabric.transport.efficiency)


def test_fragmented_placement_makes_a_ring_cross_more(make_cluster: Callable[..., Cluster]) -> None:
    block = make_cluster(nodes=16, gpn=1, nics=1, switch_radix=5, oversubscription=4)
    frag = make_cluster(nodes=16, gpn=1, nics=1, switch_radix=5, oversubscription=4,
                        placement={"mode": "fragmented", "seed": 1})
    assert ring_crossing(block, place(block, _one_group(block))) == NONE
    assert ring_crossing(frag, place(frag, _one_group(frag))).factor > 1.5


def test_all_to_all_is_bisection_bound(make_cluster: Callable[..., Cluster]) -> None:
    # 8 nodes, 2 leaves of 4 at 4:1: each leaf sends 4 x 4/8 of a buffer out over 1 line; a node's NIC
    # sends 7/8 over 0.94 line: factor 2 x 8/7 x 0.94.
    c = make_cluster(nodes=8, gpn=1, nics=1, switch_radix=5, oversubscription=4)
    p = place(c, _one_group(c))
    x = all_to_all_crossing(fabric_shape(c), c.compute_nics.speed_bytes_s * c.fabric.transport.efficiency,
                            p.nodes, p.domains)
    assert x.factor == pytest.approx(2 * 8 / 7 * c.fabric.transport.efficiency)


def test_tree_edges_cross_more_than_a_ring(make_cluster: Callable[..., Cluster]) -> None:
    c = make_cluster(nodes=16, gpn=1, nics=1, switch_radix=5, oversubscription=4)
    p = place(c, _one_group(c))
    assert tree_crossing(c, p).factor > ring_crossing(c, p).factor


def test_concurrent_groups_add_up_on_a_shared_uplink(make_cluster: Callable[..., Cluster]) -> None:
    # 2 GPUs per node, 2 NICs: a ring sends only by its GPU's NIC (NCCL's local NICs), alone or not. Alone,
    # its 0.94 line fits the leaf's 1 line of uplink; two rings (one per local GPU) put 1.88 lines on it.
    c = make_cluster(nodes=8, gpn=2, nics=2, switch_radix=5, oversubscription=4)
    one = communicator(c, "all_reduce", [[2 * k for k in range(8)]])
    both = communicator(c, "all_reduce", [[2 * k for k in range(8)], [2 * k + 1 for k in range(8)]])
    assert (one.groups_per_node, both.groups_per_node) == (1, 2)
    assert (one.nic_share, both.nic_share) == (1.0, 1.0)
    assert both.crossing_for("ring").factor == pytest.approx(2 * c.fabric.transport.efficiency)
    assert one.crossing_for("ring").stage is None


def test_dragonfly_pair_links_bound_a_ring_between_groups(make_cluster: Callable[..., Cluster]) -> None:
    c = make_cluster(nodes=16, gpn=1, nics=1, topology="dragonfly", switch_radix=8, dragonfly={"groups": 4})
    s = fabric_shape(c)
    nic = c.compute_nics.speed_bytes_s * c.fabric.transport.efficiency
    # Every node of group 0 sends to group 1 at once: 4 NICs' worth over m = 1 global link.
    src, dst = np.arange(4), np.arange(4, 8)
    x = edge_crossing(s, nic, src, dst, np.ones(4))
    assert x.stage_name == "group"
    assert x.factor == pytest.approx(4 * c.fabric.transport.efficiency)


def test_inside_one_domain_nothing_crosses(make_cluster: Callable[..., Cluster]) -> None:
    c = make_cluster(nodes=8, gpn=1, nics=1, switch_radix=5, oversubscription=4)
    g = communicator(c, "all_to_all", [[0, 1, 2, 3]])
    assert g.crossing_for("a2a") == NONE


@pytest.mark.parametrize("kind", ["fat-tree", "rail-optimized", "dragonfly"])
def test_one_weight_on_every_edge_counts_as_weighing_each(make_cluster: Callable[..., Cluster], kind: str) -> None:
    # edges counted and scaled once give the very numbers of summing each edge's weight, whether few edges
    # cross a stage (counted directly) or most do (nodes' counts per domain less the edges inside)
    shape = {"dragonfly": {"groups": 8}} if kind == "dragonfly" else {"tiers": 3, "oversubscription": [2, 1, 4]}
    c = make_cluster(nodes=64, gpn=1, nics=1, topology=kind, switch_radix=8, **shape)
    s = fabric_shape(c)
    assert len(s.stages) >= 2
    rng = np.random.default_rng(5)
    for spread in (1, 3, 64):  # edges to near nodes (few cross) ... anywhere (most cross)
        src = rng.integers(0, 64, 500)
        dst = (src + rng.integers(1, spread + 1, 500)) % 64
        for w in (1.0, 0.5):
            assert edge_crossing(s, 1e9, src, dst, w) == edge_crossing(s, 1e9, src, dst, np.full(500, w))


@pytest.mark.parametrize("kind", ["fat-tree", "rail-optimized", "dragonfly"])
def test_both_ways_from_the_edges_written_once(make_cluster: Callable[..., Cluster], kind: str) -> None:
    # a tree's edges carry the weight up and down: counted from the edges written once (each ``times`` over),
    # the very numbers of every edge written out both ways and each repeat written out
    shape = {"dragonfly": {"groups": 8}} if kind == "dragonfly" else {"tiers": 3, "oversubscription": [2, 1, 4]}
    c = make_cluster(nodes=64, gpn=1, nics=1, topology=kind, switch_radix=8, **shape)
    s, nic = fabric_shape(c), c.compute_nics.speed_bytes_s * c.fabric.transport.efficiency
    rng = np.random.default_rng(7)
    bound = []
    for spread in (1, 3, 64):
        a = rng.integers(0, 64, 300)
        b = (a + rng.integers(1, spread + 1, 300)) % 64
        times = rng.integers(1, 4, 300)
        sa, sb = np.repeat(a, times), np.repeat(b, times)
        for w in (1.0, 0.5):
            written = edge_crossing(s, nic, np.concatenate([sa, sb]), np.concatenate([sb, sa]), w)
            assert both_ways_crossing(s, nic, sa, sb, w) == written
            assert both_ways_crossing(s, nic, a, b, w, times.astype(float)) == written
            bound.append(written.stage is not None)
    assert any(bound) or kind == "dragonfly"  # a stage binds (the factors compared are not all 1)


@pytest.mark.parametrize("kind", ["fat-tree", "rail-optimized", "dragonfly"])
def test_groups_on_the_same_nodes_are_counted_once(make_cluster: Callable[..., Cluster], kind: str) -> None:
    # groups that visit the same nodes in the same order (the DP groups of one node's tp ranks) have their ring and
    # tree edges counted once, weighed by the repeats: the numbers of every group's edges written out. Three
    # groups share nodes 0-15 and one spreads over nodes 0, 4, ..., 60, so the repeats weigh the nodes and the
    # stages differently (a count that dropped them would move the factor)
    shape = {"dragonfly": {"groups": 8}} if kind == "dragonfly" else {"tiers": 3, "oversubscription": [2, 1, 4]}
    c = make_cluster(nodes=64, gpn=4, nics=2, topology=kind, switch_radix=8, **shape)
    s = fabric_shape(c)
    groups = [[t + 4 * n for n in range(16)] for t in range(3)] + [[3 + 16 * n for n in range(16)]]
    p = place(c, groups)
    node_rows = [[r // 4 for r in g] for g in groups]
    ring = [(a, b) for row in node_rows for a, b in zip(row, row[1:] + row[:1], strict=True)]
    src, dst = (np.asarray(x) for x in zip(*ring, strict=True))
    nic = c.compute_nics.speed_bytes_s * c.fabric.transport.efficiency * 2  # both NICs: every GPU of a node in play
    x = ring_crossing(c, p)
    assert x == edge_crossing(s, nic, src, dst, 1.0)
    t0, t1 = dtree_edges(16)
    up = [(row[a], row[b]) for row in node_rows for a, b in (*t0, *t1)]
    a, b = (np.asarray(v) for v in zip(*up, strict=True))
    y = tree_crossing(c, p)
    assert y == edge_crossing(s, nic, np.concatenate([a, b]), np.concatenate([b, a]), 0.5)
    assert (x.stage, y.stage) != (None, None) or kind != "fat-tree"  # a stage binds: the factors are not all 1


def _local_by_hand(shape: FabricShape, src: np.ndarray, dst: np.ndarray, w: np.ndarray) -> float:
    """The busiest dragonfly local link / line rate written out: every node edge's NIC i to the peer's NIC i (rail
    to rail), w / NICs each; across groups w / NICs / m by each of the pair's m global links, a local hop to its
    gateway and one from the far gateway; a hop inside one switch loads nothing. Summed exactly (fractions)."""
    from fractions import Fraction

    nics, epg, p = shape.nics_per_node, shape.endpoints_per_group, shape.endpoints_per_leaf
    m = max(1, shape.global_links_per_pair)
    load: dict[tuple[int, int, int], Fraction] = {}

    def add(g: int, a: int, b: int, x: Fraction) -> None:
        if a != b:
            load[(g, a, b)] = load.get((g, a, b), Fraction(0)) + x

    for s, d, x in zip(src.tolist(), dst.tolist(), w.tolist(), strict=True):
        for i in range(nics):
            es, ed = s * nics + i, d * nics + i
            gs, ss, gd, sd = es // epg, (es % epg) // p, ed // epg, (ed % epg) // p
            share = Fraction(x) / nics
            if gs == gd:
                add(gs, ss, sd, share)
                continue
            for k in range(m):
                add(gs, ss, int(shape.df_gateway(gs, gd, k)), share / m)
                add(gd, int(shape.df_gateway(gd, gs, k)), sd, share / m)
    return float(max(load.values(), default=Fraction(0))) / shape.line_bytes_s


@pytest.mark.parametrize(("gpn", "nics", "radix", "groups", "h"), [(8, 8, 16, 8, 2), (6, 3, 8, 4, 2), (4, 3, 6, 3, 3),
                                                                   (8, 6, 12, 6, 1), (4, 4, 16, 16, 2)])
def test_dragonfly_local_links_are_the_loads_written_out(make_cluster: Callable[..., Cluster], gpn: int, nics: int,
                                                         radix: int, groups: int, h: int) -> None:
    c = make_cluster(nodes=48, gpn=gpn, nics=nics, topology="dragonfly", switch_radix=radix,
                     dragonfly={"groups": groups, "global_links_per_switch": h})
    shape = fabric_shape(c)
    rng = np.random.default_rng(gpn * nics)
    for w in (np.ones(200), rng.integers(1, 9, 200).astype(float), np.full(200, 0.5)):  # whole and half weights
        src, dst = rng.integers(0, 48, 200), rng.integers(0, 48, 200)
        got = _local_time_nodes(shape, src, dst, w)
        assert got == pytest.approx(_local_by_hand(shape, src, dst, w), rel=1e-15)
        # the same edges in another order, or each written twice at half weight: the same number exactly
        order = rng.permutation(200)
        assert _local_time_nodes(shape, src[order], dst[order], w[order]) == got
        assert _local_time_nodes(shape, np.tile(src, 2), np.tile(dst, 2), np.tile(w / 2, 2)) == got
