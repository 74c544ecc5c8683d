"""One sizing rule: the shape, the graph builders and the emulator put the same nodes under each leaf."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from slowlink import units
from slowlink.emulate.plan import build_plan
from slowlink.errors import SpecError
from slowlink.spec.cluster import Cluster
from slowlink.topology.build import build
from slowlink.topology.shape import down_ports, fabric_shape

LINE = 400 * units.Gbit


@pytest.mark.parametrize(("radix", "ratio", "down"), [(64, 1, 32), (64, 4, 51), (64, 3, 48), (6, 3, 4), (4, 2, 2)])
def test_down_ports_split_the_radix_at_the_ratio(radix: int, ratio: float, down: int) -> None:
    assert down_ports(radix, ratio) == down


def test_a_nodes_nics_never_straddle_two_leaves(make_cluster: Callable[..., Cluster]) -> None:
    # radix 64 at 4:1: 51 ports down; 8 NICs per node: 6 whole nodes (48 ports), uplinks 48 x line / 4.
    s = fabric_shape(make_cluster(nodes=40, gpn=8, nics=8, switch_radix=64, oversubscription=4))
    assert (s.nodes_per_leaf, s.endpoints_per_leaf, s.uplinks_per_leaf) == (6, 48, 12)
    assert s.uplinks_per_leaf * s.leaf_uplink_bytes_s == pytest.approx(48 * LINE / 4)
    assert s.stages[0].uplink_bytes_s == pytest.approx(48 * LINE / 4)


def test_rail_leaf_holds_one_nic_of_each_of_its_nodes(make_cluster: Callable[..., Cluster]) -> None:
    s = fabric_shape(make_cluster(nodes=64, gpn=8, nics=8, topology="rail-optimized", switch_radix=64))
    assert (s.nodes_per_leaf, s.endpoints_per_leaf) == (32, 32)
    assert s.stages[0].uplink_bytes_s == pytest.approx(32 * 8 * LINE)  # the block of 8 rail leaves


def test_three_tiers_pod_from_pod_gpus_and_the_ratios_above_the_leaf(make_cluster: Callable[..., Cluster]) -> None:
    """Llama 3: 3,072-GPU pods, 1:7 above them (Dubey et al. 2024, sec. 3.3.1)."""
    s = fabric_shape(make_cluster(nodes=1024, gpn=8, nics=8, topology="rail-optimized", tiers=3,
                                  oversubscription=[1, 1, 7], pod_gpus=3072, switch_radix=64))
    assert [st.name for st in s.stages] == ["leaf", "pod"]
    assert s.stages[1].nodes_per_domain == 384 and s.leaves_per_pod == 96
    assert s.stages[1].ratio == 7
    assert s.stages[1].uplink_bytes_s == pytest.approx(384 * 8 * LINE / 7)


def test_graph_builds_the_shapes_leaves(make_cluster: Callable[..., Cluster]) -> None:
    for nodes, fab in ((40, {"switch_radix": 64, "oversubscription": 4}),
                       (10, {"switch_radix": 5, "oversubscription": 4}),
                       (16, {"topology": "rail-optimized", "switch_radix": 16}), (40, {"switch_radix": 8, "tiers": 3})):
        c = make_cluster(nodes=nodes, gpn=8, nics=8 if fab.get("topology") == "rail-optimized" else 2, **fab)
        s = fabric_shape(c)
        topo = build(c)
        leaves = {name.split("->")[1] for name in topo.names if name.startswith("nic:")}
        blocks = -(-c.nodes // s.nodes_per_leaf)
        assert len(leaves) == blocks * (s.nics_per_node if fab.get("topology") == "rail-optimized" else 1)
        for node in range(c.nodes):
            got = {topo.names[topo.nic_up[node * s.nics_per_node + i]].split("->")[1] for i in range(s.nics_per_node)}
            rails = fab.get("topology") == "rail-optimized"
            want = {f"leaf:{s.leaf_of_node(node) * (s.nics_per_node if rails else 1) + (i if rails else 0)}"
                    for i in range(s.nics_per_node)}
            assert got == want


def test_emulator_uses_the_same_leaves(make_cluster: Callable[..., Cluster]) -> None:
    for radix, ratio in ((4, 2), (4, 3), (6, 3)):
        c = make_cluster(nodes=6, gpn=1, nics=1, switch_radix=radix, oversubscription=ratio, transport="ethernet")
        plan = build_plan(c, scale=0.004)
        s = fabric_shape(c)
        assert plan.nodes_per_leaf == s.nodes_per_leaf
        up = [x for x in plan.links if x.name.startswith("up")]
        assert len(up) == -(-6 // s.nodes_per_leaf)
        assert up[0].rate_bytes_s == pytest.approx(s.stages[0].uplink_bytes_s * 0.004)


def test_dragonfly_shape_is_balanced(make_cluster: Callable[..., Cluster]) -> None:
    s = fabric_shape(make_cluster(nodes=16, gpn=1, nics=1, topology="dragonfly", switch_radix=8,
                                  dragonfly={"groups": 4}))
    assert (s.endpoints_per_leaf, s.switches_per_group, s.global_links_per_pair) == (2, 2, 1)
    assert s.stages[0].pair_bytes_s == pytest.approx(LINE)


def test_dragonfly_gateway_of_arrays_is_the_gateway_of_each_pair(make_cluster: Callable[..., Cluster]) -> None:
    s = fabric_shape(make_cluster(nodes=40, gpn=1, nics=1, topology="dragonfly", switch_radix=8,
                                  dragonfly={"groups": 5, "global_links_per_switch": 2}))
    i, j = np.array([0, 0, 1, 3, 4, 2]), np.array([1, 4, 0, 2, 0, 3])
    for k in range(s.global_links_per_pair):
        got = s.df_gateway(i, j, k)
        assert list(got) == [s.df_gateway(int(a), int(b), k) for a, b in zip(i, j, strict=True)]
        assert all(0 <= g < s.switches_per_group for g in got)


def test_two_tiers_join_at_most_radix_leaves(make_cluster: Callable[..., Cluster]) -> None:
    # radix 5 at 4:1: 4 ports down, 2 NICs per node -> 2 nodes per leaf; 12 nodes need 6 leaves > 5 spine ports
    with pytest.raises(SpecError, match=r"tiers \(2\) with switch_radix \(5\): 12 nodes need 6 leaves .*use tiers: 3"):
        fabric_shape(make_cluster(nodes=12, gpn=8, nics=2, switch_radix=5, oversubscription=4))
    # rails: 8 rail leaves per block of 8 nodes (radix 16 at 1:1); 3 blocks = 24 leaves > 16
    with pytest.raises(SpecError, match=r"24 leaves \(8 nodes per leaf per rail\)"):
        fabric_shape(make_cluster(nodes=24, gpn=8, nics=8, topology="rail-optimized", switch_radix=16))
    assert fabric_shape(make_cluster(nodes=10, gpn=8, nics=2, switch_radix=5, oversubscription=4)).nodes_per_leaf == 2
