"""Bill of materials: NVIDIA's DGX SuperPOD tables exactly, larger and 3-tier cases by hand, and every count
against the graph the flow simulator builds from the same sizing rule."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from slowlink.cost.bom import bill_of_materials
from slowlink.cost.design import Design, build_design
from slowlink.cost.prices import load_prices
from slowlink.errors import SpecError
from slowlink.spec.cluster import Cluster, cluster_from_mapping, load_cluster
from slowlink.topology.build import build

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def superpod(nodes: int, tiers: int = 2, **fabric: Any) -> Cluster:
    """DGX H100 nodes on 8 x NDR rails, rail-optimized, 64-port Quantum-2 switches, the UFM's 4 ports."""
    return cluster_from_mapping({
        "name": "superpod", "nodes": nodes, "gpus_per_node": 8, "gpu": "h100-sxm",
        "scale_up": {"link": "nvlink4", "domain_gpus": 8},
        "nics": {"compute": {"per_node": 8, "speed_gbit_s": 400}},
        "fabric": {"transport": "infiniband", "topology": "rail-optimized", "tiers": tiers, "switch_radix": 64,
                   "management_ports": 4, **fabric}})


def test_superpod_1su_matches_the_reference_architecture() -> None:
    # NVIDIA DGX SuperPOD: Next Generation Scalable Infrastructure for AI Leadership, Reference Architecture
    # featuring DGX H100 (RA-11333-001), compute fabric component counts, 1 SU: 31 DGX H100 nodes (the UFM
    # takes the 32nd slot), 248 GPUs, 8 leaf + 4 spine switches, 252 node-leaf and 256 leaf-spine cables.
    bom = bill_of_materials(load_cluster(EXAMPLES / "cost-superpod-1su.yaml"))
    assert bom.switches == {"leaf": 8, "spine": 4}
    assert bom.links == {"node_leaf": 252, "leaf_spine": 256}
    assert bom.nics == {"compute": 248}
    assert bom.notes == ()


@pytest.mark.parametrize(("sus", "leaves", "spines"), [(2, 16, 8), (4, 32, 16)])
def test_superpod_two_tier_scalable_units_by_hand(sus: int, leaves: int, spines: int) -> None:
    # By hand: an SU is 32 node slots, the fabric holds 32 x SUs - 1 DGX and the UFM in the last slot;
    # a 64-port leaf puts 32 ports down, 32 up (1:1); one leaf per rail per SU -> 8 x SUs leaves, each with
    # 32 uplinks; spines = leaves x 32 / 64. Node-leaf = 8 x nodes + the UFM's 4 ports.
    nodes = 32 * sus - 1
    bom = bill_of_materials(superpod(nodes))
    assert bom.switches == {"leaf": leaves, "spine": spines}
    assert bom.links == {"node_leaf": 8 * nodes + 4, "leaf_spine": leaves * 32}


def test_superpod_three_tier_by_hand() -> None:
    # 16 SUs, 511 DGX + UFM (NVIDIA's 4,088-GPU layout, also Imbue's 511-node H100 cluster). By hand:
    # 128 leaves (16 SUs x 8 rails), 32 uplinks each -> 4,096 leaf-spine cables. A pod is what one
    # aggregation (spine) plane reaches: 32 down ports = 32 leaves = 4 SUs, so 4 pods; each of a leaf's 32
    # uplinks goes to its own spine plane, and every spine puts 32 ports down and 32 up: 4,096 down ports /
    # 32 = 128 spines, whose 4,096 uplinks fill 4,096 / 64 = 64 cores.
    bom = bill_of_materials(superpod(511, tiers=3))
    assert bom.switches == {"leaf": 128, "spine": 128, "core": 64}
    assert bom.links == {"node_leaf": 4092, "leaf_spine": 4096, "spine_core": 4096}
    assert bom.notes == ()


def test_oversubscribed_leaf_by_hand() -> None:
    # 2:1 at the leaf of 64 ports: floor(64 x 2 / 3) = 42 down, round(42 / 2) = 21 up. 64 nodes x 8 rails:
    # ceil(64 / 42) = 2 blocks x 8 rails = 16 leaves, 336 uplinks on ceil(336 / 64) = 6 spines.
    bom = bill_of_materials(superpod(64, oversubscription=2, management_ports=0))
    assert bom.switches == {"leaf": 16, "spine": 6}
    assert bom.links == {"node_leaf": 512, "leaf_spine": 336}


def test_two_tier_past_the_radix_is_refused() -> None:
    # 128 compute leaves on a 2-tier tree of 64-port spines: refused by the one sizing rule (topology/shape.py)
    with pytest.raises(SpecError, match=r"need 128 leaves .*use tiers: 3"):
        bill_of_materials(superpod(32 * 16 - 1))


def test_storage_leaves_past_the_radix_are_flagged() -> None:
    # 4 compute leaves fit a radix-4 spine; 2 more leaves for the converged storage targets do not
    c = cluster_from_mapping({
        "name": "s", "nodes": 4, "gpus_per_node": 4, "gpu": "h100-sxm", "scale_up": {"link": "nvlink4"},
        "nics": {"compute": {"per_node": 2, "speed_gbit_s": 400}, "storage": {"per_node": 1, "speed_gbit_s": 200}},
        "fabric": {"transport": "infiniband", "tiers": 2, "switch_radix": 4},
        "storage": {"system": "parallel-fs", "shared_with_compute": True, "read_gbyte_s": 10.0,
                    "write_gbyte_s": 10.0, "metadata_ops_s": 1e5, "targets": 3}})
    assert any("6 leaves exceed switch_radix (4)" in n for n in bill_of_materials(c).notes)


def test_management_ports_need_free_leaf_ports() -> None:
    with pytest.raises(SpecError, match=r"fabric.management_ports \(4\) must fit the 0 free leaf ports"):
        bill_of_materials(superpod(32))


def test_top_of_rack_copper_and_optics() -> None:
    # A fat-tree leaf of 64 ports with 8 NICs per node serves 4 nodes: one rack of DGX H100 -> copper.
    fat = bill_of_materials(superpod(8, topology="fat-tree", management_ports=0), nodes_per_rack=4)
    assert fat.media["node_leaf"] == "dac" and fat.transceivers == {"400G-SR4": 2 * fat.links["leaf_spine"]}
    rail = bill_of_materials(superpod(8, management_ports=0))
    assert rail.media["node_leaf"] == "mmf"


def _graph_links(c: Cluster) -> Counter[str]:
    """Physical links of the built graph by tier (each link appears once, in its u -> v direction)."""
    topo = build(c)
    tiers: Counter[str] = Counter()
    for name in topo.names[::2]:  # add_link appends u->v then v->u
        u, v = (part.split(":")[0] for part in name.split("->"))
        tiers[{("nic", "leaf"): "node_leaf", ("leaf", "spine"): "leaf_spine", ("leaf", "agg"): "leaf_spine",
               ("agg", "core"): "spine_core", ("nic", "df"): "node_switch"}.get((u, v), f"{u}-{v}")] += 1
    if c.fabric.topology == "dragonfly":
        for name in topo.names[::2]:
            a, b = name.split("->")
            if a.startswith("df:") and b.startswith("df:"):
                tiers["local" if a.split(":")[1] == b.split(":")[1] else "global"] += 1
        tiers.pop("df-df", None)
    return tiers


def test_every_count_matches_the_graph(topology: str, topology_cluster: Callable[[str], Cluster]) -> None:
    c = topology_cluster(topology)
    if c.fabric.routing == "adaptive":  # spraying builds one trunk per switch, not one link per cable
        pytest.skip("adaptive routing keeps trunks, not cables")
    bom = bill_of_materials(c)
    graph = _graph_links(c)
    assert {k: v for k, v in bom.links.items() if v} == {k: v for k, v in graph.items() if k in bom.links}
    assert set(graph) <= set(bom.links) | {"gpu-nvsw"}
    vertices = {v for name in build(c).names for v in name.split("->")}
    kinds = Counter(v.split(":")[0] for v in vertices)
    assert bom.switches.get("leaf", bom.switches.get("group", 0)) == kinds.get("leaf", kinds.get("df", 0))


# NVIDIA DGX SuperPOD reference architecture with DGX B200 (docs.nvidia.com/dgx-superpod/reference-architecture-
# scalable-infrastructure-b200, "DGX SuperPOD Architecture", table of larger DGX SuperPOD component counts):
# SUs of 32 DGX B200 (8 x 400G NDR rails, rail-optimized, Quantum-2 64-port), no UFM port in the node-leaf count.
# (SUs, leaf, spine, core, node-leaf, leaf-spine, spine-core); core "-" in the RA is 0 here.
B200_RA = [(2, 16, 8, 0, 512, 512, 0), (4, 32, 16, 0, 1024, 1024, 0), (8, 64, 32, 0, 2048, 2048, 0),
           (16, 128, 128, 64, 4096, 4096, 4096), (32, 256, 256, 128, 8192, 8192, 8192),
           (64, 512, 512, 256, 16384, 16384, 16384)]


@pytest.mark.parametrize(("sus", "leaf", "spine", "core", "node_leaf", "leaf_spine", "spine_core"), B200_RA)
def test_superpod_b200_table_on_the_fewest_tiers(sus: int, leaf: int, spine: int, core: int, node_leaf: int,
                                                 leaf_spine: int, spine_core: int) -> None:
    # build_design picks the fewest tiers that fit: 2 up to 8 SUs (64 leaves = the radix), 3 above, as the RA
    c = build_design(Design("b200", 32 * sus, 8, 400, "infiniband", "rail-optimized", 1.0), load_prices())
    bom = bill_of_materials(c)
    assert bom.switches == {k: v for k, v in {"leaf": leaf, "spine": spine, "core": core}.items() if v}
    assert bom.links == {k: v for k, v in {"node_leaf": node_leaf, "leaf_spine": leaf_spine,
                                           "spine_core": spine_core}.items() if v}


@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("tiers", [2, 3])
def test_storage_counts_match_the_graph(shared: bool, tiers: int) -> None:
    c = cluster_from_mapping({
        "name": "s", "nodes": 8 if tiers == 3 else 4, "gpus_per_node": 4, "gpu": "h100-sxm",
        "scale_up": {"link": "nvlink4"},
        "nics": {"compute": {"per_node": 2, "speed_gbit_s": 400}, "storage": {"per_node": 1, "speed_gbit_s": 200}},
        "fabric": {"transport": "infiniband", "tiers": tiers, "switch_radix": 4, "routing": "dmodk"},
        "storage": {"system": "parallel-fs", "shared_with_compute": shared, "read_gbyte_s": 10.0,
                    "write_gbyte_s": 10.0, "metadata_ops_s": 1e5, "targets": 3}})
    bom = bill_of_materials(c)
    graph = _graph_links(c)
    if shared:  # 3 targets on ceil(3 / 2) = 2 storage leaves of their own, with uplinks like any leaf
        assert bom.links["storage_leaf"] == graph["stor-leaf"] == 3
        assert bom.switches["leaf"] == c.nodes + 2 and "storage" not in bom.switches
    else:  # one storage switch: a cable per storage NIC (the graph aggregates a node's) and per target
        assert bom.links["node_storage"] == graph["snic-storsw"] == c.nodes
        assert bom.links["storage_target"] == graph["storsw-stor"] == 3
        ports = c.nodes + 3  # a storage NIC per node and the 3 targets, on radix-4 boxes
        assert bom.switches["storage"] == -(-ports // 4) and any("storage switch" in n for n in bom.notes)
        assert bom.tier_speed_gbit_s("node_storage") == 200
    assert bom.links["leaf_spine"] == graph["leaf_spine"]
    assert bom.links.get("spine_core", 0) == graph.get("spine_core", 0)
