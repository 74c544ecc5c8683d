"""Topology builders: sizes, capacities, routing and placement."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from slowlink.errors import SpecError
from slowlink.spec.cluster import Cluster
from slowlink.topology.build import build
from slowlink.topology.fabric import Topology


def _switches(topo: Topology, prefix: str) -> set[str]:
    return {v for name in topo.names for v in name.split("->") if v.startswith(prefix)}


def test_three_tier_has_pods_and_cores_and_per_tier_ratio(make_cluster: Callable[..., Cluster]) -> None:
    # radix 4, o = [1, 2, 2]: leaves of 2 NICs with 2 uplinks; pods of int(4*2/3) = 2 leaves; agg uplinks
    # carry pod downlink / 2.
    c = make_cluster(nodes=8, gpn=4, nics=2, switch_radix=4, tiers=3, oversubscription=[1, 2, 2])
    topo = build(c)
    assert len(_switches(topo, "leaf:")) == 8
    assert len(_switches(topo, "agg:")) == 4 * 2
    leaf_up = topo.capacity_bytes_s[topo.link_id[("leaf:0", "agg:0:0")]]
    pod_up = sum(cap for name, cap in zip(topo.names, topo.capacity_bytes_s, strict=True)
                 if name.startswith("agg:0:") and "->core" in name)
    assert leaf_up == pytest.approx(c.compute_nics.speed_bytes_s)
    assert pod_up == pytest.approx(2 * 2 * leaf_up / 2)


def test_ecmp_path_crosses_the_core_between_pods_and_spraying_uses_trunks(make_cluster: Callable[..., Cluster]) -> None:
    ecmp = build(make_cluster(nodes=8, gpn=4, nics=2, switch_radix=4, tiers=3))
    names = [ecmp.names[i] for _, p in ecmp.gpu_paths(0, 31) for i in p]
    assert any("core:" in n for n in names) and len(names) == 6
    spray = build(make_cluster(nodes=8, gpn=4, nics=2, switch_radix=4, tiers=3, routing="adaptive"))
    assert [spray.names[i] for _, p in spray.gpu_paths(0, 31) for i in p][2] == "aggs:0->cores"


def test_rail_optimized_puts_each_nic_index_on_its_own_leaf(make_cluster: Callable[..., Cluster]) -> None:
    topo = build(make_cluster(nodes=4, gpn=4, nics=4, topology="rail-optimized"))
    leaves = {name.split("->")[1] for name in topo.names if name.startswith("nic:0:")}
    assert len(leaves) == 4


def test_dragonfly_minimal_route_uses_one_global_link(make_cluster: Callable[..., Cluster]) -> None:
    c = make_cluster(nodes=8, gpn=4, nics=2, topology="dragonfly", switch_radix=4, dragonfly={"groups": 4})
    topo = build(c)
    path = topo.gpu_paths(0, 31)[0][1]
    groups = [int(topo.names[i].split("->")[1].split(":")[1]) for i in path if "df:" in topo.names[i].split("->")[1]]
    assert groups[0] == 0 and groups[-1] == 3


def test_dragonfly_groups_must_fit(make_cluster: Callable[..., Cluster]) -> None:
    c = make_cluster(nodes=2, gpn=1, nics=1, topology="dragonfly", dragonfly={"groups": 3})
    with pytest.raises(SpecError, match=r"fabric\.dragonfly\.groups \(3\)"):
        build(c)


def test_scale_up_domain_spanning_nodes_keeps_traffic_on_nvlink(make_cluster: Callable[..., Cluster]) -> None:
    topo = build(make_cluster(nodes=4, gpn=4, nics=1, domain=16, link="nvlink5", gpu="gb200"))
    path = topo.gpu_paths(0, 15)[0][1]
    assert [topo.names[i] for i in path] == ["gpu:0->nvsw:0", "nvsw:0->gpu:15"]


def test_custom_placement_moves_ranks_between_leaves(make_cluster: Callable[..., Cluster]) -> None:
    block = build(make_cluster(nodes=4, gpn=1, nics=1, switch_radix=4))
    custom = build(make_cluster(nodes=4, gpn=1, nics=1, switch_radix=4,
                                placement={"mode": "custom", "node_order": [0, 2, 1, 3]}))
    assert len(block.gpu_paths(0, 1)[0][1]) == 2      # ranks 0, 1 on nodes 0, 1: one leaf
    assert len(custom.gpu_paths(0, 1)[0][1]) == 4     # rank 1 on node 2: across the spine
    assert custom.gpu_of(1) == 2


def test_ecmp_hash_is_seeded(make_cluster: Callable[..., Cluster]) -> None:
    a = build(make_cluster(nodes=8, gpn=1, nics=1, switch_radix=4, routing="ecmp", ecmp_seed=1))
    b = build(make_cluster(nodes=8, gpn=1, nics=1, switch_radix=4, routing="ecmp", ecmp_seed=2))
    pairs = [(s, d) for s in range(4) for d in range(4, 8)]
    pa = [a.gpu_paths(s, d, key=k)[0][1] for s, d in pairs for k in range(4)]
    assert pa == [a.gpu_paths(s, d, key=k)[0][1] for s, d in pairs for k in range(4)]
    assert pa != [b.gpu_paths(s, d, key=k)[0][1] for s, d in pairs for k in range(4)]
