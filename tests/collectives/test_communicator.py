"""One communicator function for both models: placement, NIC sharing, point-to-point pairs."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from slowlink.collectives.communicator import Group, communicator, domain_channels, with_crossing
from slowlink.collectives.links import resolve
from slowlink.collectives.nccl_trees import tree_edges
from slowlink.spec.cluster import Cluster


def test_span_follows_the_placement(make_cluster: Callable[..., Cluster]) -> None:
    # radix 10 at 4:1: 8 ports down, 2 nodes of 4 NICs per leaf, 2 lines of uplink.
    fab = {"switch_radix": 10, "oversubscription": 4}
    block = make_cluster(nodes=8, gpn=4, nics=4, **fab)
    custom = make_cluster(nodes=8, gpn=4, nics=4, placement={"mode": "custom", "node_order": [0, 4, 1, 5, 2, 6, 3, 7]},
                          **fab)
    groups = [[0, 4], [1, 5], [2, 6], [3, 7]]  # one rank per node on rank blocks 0 and 1
    a, b = communicator(block, "all_reduce", groups), communicator(custom, "all_reduce", groups)
    assert (a.ranks, a.ranks_per_node, a.groups_per_node, a.span_nodes) == (2, 1, 4, 2)
    assert (b.ranks, b.ranks_per_node, b.groups_per_node, b.span_nodes) == (2, 1, 4, 2)
    # Blocks 0 and 1 share a leaf under block placement; under custom they sit on nodes 0 and 4, two leaves
    # apart, and the 4 rings' 4 lines cross 2 lines of uplink against 4 x 0.94 lines of NIC.
    assert a.crossing_for("ring").stage is None
    assert b.crossing_for("ring").stage == 0
    assert b.crossing_for("ring").factor == pytest.approx(2 * custom.fabric.transport.efficiency)


def test_send_recv_pairs_share_the_source_nodes_nics(make_cluster: Callable[..., Cluster]) -> None:
    c = make_cluster(nodes=2, gpn=8, nics=2)
    pairs = [[r, r + 8] for r in range(8)]
    g = communicator(c, "send_recv", pairs)
    assert (g.ranks, g.ranks_per_node, g.groups_per_node) == (2, 1, 4)   # 8 pairs over 2 NICs
    inside = communicator(c, "send_recv", [[0, 1]])
    assert (inside.ranks_per_node, inside.groups_per_node, inside.span_nodes) == (2, 1, 1)


def test_hand_made_group_gets_block_crossings(make_cluster: Callable[..., Cluster]) -> None:
    c = make_cluster(nodes=8, gpn=2, nics=2, switch_radix=5, oversubscription=4)
    g = with_crossing(c, "all_to_all", Group(ranks=16, ranks_per_node=2))
    assert g.crossing_for("a2a").stage == 0
    assert with_crossing(c, "all_to_all", g) is g


def test_tree_edges_are_nccls_two_trees() -> None:
    # ncclGetBtree over 4: 0 is the root, 2 its child, 1 and 3 children of 2; tree 1 is the mirror (n even).
    e = tree_edges(4)
    assert e[:3] == [(1, 2), (2, 0), (3, 2)]
    assert e[3:] == [(2, 1), (1, 3), (0, 1)]
    # n odd: tree 1 is tree 0 shifted by one.
    assert tree_edges(3) == [(1, 2), (2, 0), (2, 0), (0, 1)]
    assert len(tree_edges(1)) == 0


def test_a_domain_spanning_nodes_has_a_channel_per_member_nic_on_every_node() -> None:
    # 8 GPUs over 2 nodes of 4 (multi-node NVLink): NCCL's fused clique spreads channels over both trays.
    nodes = [0, 0, 0, 0, 1, 1, 1, 1]
    assert domain_channels(list(range(8)), nodes, 4, 1) == [(0, 0, 0), (4, 1, 0)]
    four = domain_channels(list(range(8)), nodes, 4, 4)
    assert [(n, ln) for _, n, ln in four] == [(n, ln) for n in (0, 1) for ln in range(4)]
    assert [r for r, _, _ in four] == list(range(8))  # each NIC headed by its own GPU
    # a member alone on its tray reaches only its GPU's NIC(s), wherever it sits in the domain
    assert domain_channels([5], [1], 4, 4) == [(5, 1, 1)]


def test_placed_groups_count_their_members_per_spanning_domain(make_cluster: Callable[..., Cluster]) -> None:
    c = make_cluster(nodes=8, gpn=4, nics=4, domain=16, topology="rail-optimized", switch_radix=8)
    nic = c.compute_nics.speed_bytes_s * c.fabric.transport.efficiency
    whole = communicator(c, "all_reduce", [list(range(32))])
    assert whole.domain == (16, 4, 2, 16)  # 16 channels: 4 trays x 4 NICs
    assert resolve(c, whole).net_bw_bytes_s == pytest.approx(16 * nic)  # 4 trays x 4 NICs
    lone = communicator(c, "all_reduce", [[0, 16]])  # one rank per domain: its GPU's one NIC
    assert lone.domain == (1, 1, 2, 1)
    links = resolve(c, lone)
    assert (links.ranks_per_domain, links.domains) == (1, 2)
    assert links.net_bw_bytes_s == pytest.approx(nic)


def test_tree_edge_array_is_nccls_two_trees() -> None:
    from slowlink.collectives.nccl_trees import dtree_edge_array

    for n in [*range(0, 70), 127, 128, 1000, 1023, 1024, 4097]:
        assert dtree_edge_array(n).tolist() == [list(e) for e in tree_edges(n)]
