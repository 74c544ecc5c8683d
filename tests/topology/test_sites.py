"""The long haul in the flow simulator's graph: each site's egress as edges, flows between sites routed over them,
flows inside a site as before; a ring all-reduce across a slow long haul takes the cross-site bytes over its rate."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from slowlink import units
from slowlink.assess import assess
from slowlink.sim.collectives import simulate_collective
from slowlink.sites.traffic import ring_cross_site_bytes
from slowlink.spec.cluster import load_cluster
from slowlink.spec.workload import load_workload
from slowlink.topology.build import build

EX = Path(__file__).parents[2] / "examples"
TWO = load_cluster(EX / "two-site-1000km.yaml")
ONE = replace(TWO, sites=None)
assert TWO.sites is not None
SLOW = replace(TWO, sites=replace(TWO.sites, interconnect=replace(TWO.sites.interconnect,
                                                                  link_bytes_s=10 * units.Gbit)))


def test_each_site_has_its_egress_in_the_graph() -> None:
    topo, plain = build(TWO), build(ONE)
    assert len(topo.capacity_bytes_s) == len(plain.capacity_bytes_s) + 4  # 2 sites x both directions
    g = topo.graph
    assert g.has_edge("site:east", "wan") and g.has_edge("wan", "site:west")
    edge = g.edges["site:east", "wan"]
    assert edge["capacity_bytes_s"] == 2 * 400 * units.Gbit and edge["latency_s"] == pytest.approx(0.005)
    assert g.edges["wan", "site:west"]["latency_s"] == 0.0  # one one-way delay per crossing


def test_routes_inside_a_site_are_unchanged_and_between_sites_cross_the_long_haul() -> None:
    topo, plain = build(TWO), build(ONE)
    assert topo.route is not None and plain.route is not None
    assert topo.route(0, 3, 7) == plain.route(0, 3, 7)  # nodes 0 and 3: both in east (4 nodes each)
    ((w, path),) = topo.route(0, 5, 7)
    names = [topo.names[i] for i in path]
    assert w == 1.0 and names[1:3] == ["site:east->wan", "wan->site:west"]
    assert topo.route_array is not None and plain.route_array is not None
    a, b, h = np.array([0, 0, 6]), np.array([3, 5, 1]), np.array([7, 7, 2], dtype=np.uint64)
    arr = topo.route_array(a, b, h)
    inside = plain.route_array(a[:1], b[:1], h[:1])
    assert list(arr[0, : inside.shape[1]]) == list(inside[0])
    assert [topo.names[i] for i in arr[1] if i >= 0] == names
    assert [topo.names[i] for i in arr[2] if i >= 0][1:3] == ["site:west->wan", "wan->site:east"]


def test_each_site_is_a_fabric_of_its_own() -> None:
    g = build(TWO).graph
    assert g.has_edge("nic:0:0", "east/leaf:0") and g.has_edge("nic:4:0", "west/leaf:0")
    assert not any(v.startswith("leaf:") for v in g.nodes)  # no switch shared by the two buildings
    west_eth = replace(TWO, site_fabrics=(("west", replace(TWO.fabric, transport=replace(
        TWO.fabric.transport, efficiency=0.5))),))
    topo = build(west_eth)
    east_cap = topo.capacity_bytes_s[topo.nic_up[0]]
    west_cap = topo.capacity_bytes_s[topo.nic_up[4]]
    assert west_cap == pytest.approx(east_cap * 0.5 / TWO.fabric.transport.efficiency)


def test_a_ring_across_a_slow_long_haul_takes_its_bytes_over_its_rate() -> None:
    # 8 ranks, one per node, 4 per site; 1 GB: the ring's edge out of each site carries 2 (n-1)/n x S
    size = 1 * units.GB
    ranks = [8 * k for k in range(8)]
    pred, _ = simulate_collective(SLOW, "all_reduce", size, ranks, build(SLOW))
    assert SLOW.sites is not None
    bound = ring_cross_site_bytes(size, 8, 2) / SLOW.sites.interconnect.egress_bytes_s
    assert pred.time_s == pytest.approx(bound, rel=0.05)
    alone, _ = simulate_collective(ONE, "all_reduce", size, ranks, build(ONE))
    assert alone.time_s < bound / 10


def test_the_chain_at_flow_fidelity_prices_the_long_haul_once() -> None:
    w = load_workload(EX / "llama3-8b.yaml")
    a = assess(w, TWO, fidelity="flow", full=False)
    one = assess(w, ONE, fidelity="flow", full=False)
    assert a.cross_site is not None
    assert a.step.step_time_s == pytest.approx(one.step.step_time_s + a.cross_site.exposed_s)


def test_a_site_of_several_leaves_routes_over_its_own_spines() -> None:
    small = replace(SLOW, fabric=replace(SLOW.fabric, switch_radix=4))  # 2 nodes per leaf: 2 leaves per site
    topo = build(small)
    assert topo.route is not None and topo.route_array is not None
    ((_, path),) = topo.route(4, 7, 3)  # west's first and last node: different leaves
    names = [topo.names[i] for i in path]
    assert names[1].startswith("west/leaf:0->west/spine") and names[2].startswith("west/spine")
    arr = topo.route_array(np.array([4, 0]), np.array([7, 3]), np.array([3, 3], dtype=np.uint64))
    assert [topo.names[i] for i in arr[0] if i >= 0] == names
    assert all(topo.names[i].split("->")[1].startswith(("east/", "nic:")) for i in arr[1] if i >= 0)


@pytest.mark.parametrize("radix", [64, 4])
@pytest.mark.parametrize(("op", "algorithm"), [("all_reduce", "ring"), ("all_reduce", "tree"),
                                               ("all_reduce", "hierarchical"), ("all_gather", "ring"),
                                               ("all_to_all", "p2p"), ("send_recv", "p2p")])
def test_invariants_across_sites(op: str, algorithm: str, radix: int, simulated_phase: Callable[..., Any]) -> None:
    from slowlink.sim.flows import phases

    topo = build(replace(SLOW, fabric=replace(SLOW.fabric, switch_radix=radix)))
    ranks = list(range(SLOW.gpus))
    groups = [[0, SLOW.gpus - 1]] if op == "send_recv" else [ranks]
    crossed = 0.0
    for ph in phases(topo, op, algorithm, groups, 16 * units.MiB):
        r = simulated_phase(topo, ph.flows)
        crossed += r.link_bytes[topo.link_id[("site:east", "wan")]]
    assert crossed > 0  # every one of these groups spans both sites
