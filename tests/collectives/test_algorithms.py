"""NCCL's algorithm list, and the NIC line-rate bounds no prediction may beat (issue 13, item 6)."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from slowlink import units
from slowlink.collectives import Group, predict
from slowlink.collectives.constants import ALGORITHMS, PROTOCOLS
from slowlink.collectives.links import resolve
from slowlink.collectives.model import candidates
from slowlink.spec.cluster import Cluster, cluster_from_mapping

SIZES = [2.0**k for k in range(16, 34, 3)]


def test_default_pick_is_an_nccl_algorithm() -> None:
    """NCCL has ring, tree, collnet, nvls, nvls_tree, pat (src/graph/tuning.cc); never 'hierarchical'."""
    assert set(ALGORITHMS) <= {"ring", "tree", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat"}


def test_one_100g_nic_per_a100_node_caps_busbw_at_line_rate(make: Callable[..., Cluster]) -> None:
    """Issue 13: 4 nodes x 8 A100, one 100G NIC, 16 ranks (4 per node), 1 GiB: was 14.8 GB/s (hierarchical),
    above the NIC's 12.5 GB/s. Ring and tree move 2(n-1)/n x S through each node's NIC: busbw <= line."""
    c = make(nodes=4, gpu="a100-80gb", link="nvlink3", nics=1, speed=100)
    p = predict(c, "all_reduce", units.GiB, Group(16, 4))
    assert p.algorithm in ALGORITHMS
    assert p.busbw_bytes_s <= 100 * units.Gbit


def test_hierarchical_only_when_named(make: Callable[..., Cluster]) -> None:
    c = make(nodes=4, gpu="a100-80gb", link="nvlink3", nics=1, speed=100)
    links = resolve(c, Group(16, 4, 1))
    default = candidates(c, links, "all_reduce", units.GiB, ALGORITHMS, PROTOCOLS)
    named = candidates(c, links, "all_reduce", units.GiB, ("hierarchical",), PROTOCOLS)
    assert "hierarchical" not in {x.algorithm for x in default}
    assert {x.algorithm for x in named} == {"hierarchical"}


@pytest.mark.parametrize(("gpu", "link", "nics", "speed"), [
    ("a100-80gb", "nvlink3", 1, 100), ("a100-80gb", "nvlink3", 4, 200), ("h100-sxm", "nvlink4", 1, 400),
    ("h100-sxm", "nvlink4", 8, 400), ("b200", "nvlink5", 8, 400),
])
def test_no_prediction_beats_the_nic_bytes_bound(make: Callable[..., Cluster], gpu: str, link: str, nics: int,
                                                 speed: float) -> None:
    """Every node must move at least 2(d-1)/d x S (all_reduce) or (d-1)/d x S (all_gather, reduce_scatter)
    through its NICs, d = nodes (the reduce-scatter + all-gather lower bound). Without in-switch reduction,
    ring, tree and PAT move more, so their busbw also stays under the node's line rate; except a tree over
    two nodes, a chain of two that moves exactly the bound (S each way), so its algbw stays under the line
    rate and its busbw may exceed it (NVIDIA/nccl-tests issues 22 and 196, NCCL maintainers)."""
    for nodes, rpn, op, size in itertools.product((2, 4, 16), (1, 4, 8), ("all_reduce", "all_gather",
                                                                          "reduce_scatter"), SIZES):
        c = make(nodes=nodes, gpu=gpu, link=link, nics=nics, speed=speed)
        p = predict(c, op, size, Group(nodes * rpn, rpn))
        line = nics * speed * units.Gbit
        need = (2.0 if op == "all_reduce" else 1.0) * (nodes - 1) / nodes * size
        assert p.time_s >= need / line, (nodes, rpn, op, size, p)
        if p.algorithm == "tree" and nodes == 2:
            assert p.algbw_bytes_s <= line * 1.0001, (nodes, rpn, op, size, p)
        elif p.algorithm in ("ring", "tree", "pat"):
            assert p.busbw_bytes_s <= line * 1.0001, (nodes, rpn, op, size, p)


def test_pat_runs_at_one_rank_per_node_only(make: Callable[..., Cluster]) -> None:
    c = make(nodes=64)
    small = predict(c, "all_gather", 64 * units.KiB, Group(64, 1), algorithm="pat")
    assert small.algorithm == "pat"
    links = resolve(c, Group(64, 8, 1))
    assert not candidates(c, links, "all_gather", units.MiB, ("pat",), PROTOCOLS)


def _tcp_ring_cluster(nic_bytes_s: float) -> Cluster:
    """4 nodes x 1 GPU, one NIC each, kernel TCP with no added latency: the emulated cluster of issue 13
    (examples/emulate-2leaf.yaml as emulate.validate.emulated_cluster scales it)."""
    from dataclasses import replace

    from slowlink.spec.cluster import NicGroup
    c = cluster_from_mapping({
        "name": "emu", "nodes": 4, "gpus_per_node": 1, "gpu": "h100-sxm",
        "scale_up": {"link": "nvlink4", "domain_gpus": 1},
        "nics": {"compute": {"per_node": 1, "speed_gbit_s": 25}},
        "fabric": {"transport": "ethernet", "lossless": False, "topology": "fat-tree", "tiers": 2,
                   "oversubscription": "2:1", "switch_radix": 4},
    }, "emu")
    t = replace(c.fabric.transport, efficiency=1.0, latency_s=0.0)
    return replace(c, compute_nics=NicGroup(1, nic_bytes_s),
                   fabric=replace(c.fabric, transport=t, switch_latency_s=0.0, routing="adaptive"))


@pytest.mark.parametrize("nic_bytes_s", [11.95e6, 23.9e6])
@pytest.mark.parametrize("size", [4 * units.MiB, 64 * units.MiB])
def test_ring_on_a_slow_network_is_bytes_per_link_over_bw(nic_bytes_s: float, size: float) -> None:
    """Every link of a ring carries every step from the first one: no pipeline fill. 4 ranks, one per node,
    gloo-like TCP ring: time within 10% of 2(n-1)/n x size / bw + latency (issue 13: the old byte-window fill
    predicted +83% at 4 MiB, i.e. 0.965 s against 0.535 s measured and 0.526 s flow)."""
    c = _tcp_ring_cluster(nic_bytes_s)
    p = predict(c, "all_reduce", size, Group(ranks=4, ranks_per_node=1), algorithm="ring", protocol="Simple")
    ideal = 2 * 3 / 4 * size / nic_bytes_s  # + latency: 8.4 us base, no link delay
    assert abs(p.time_s / ideal - 1) <= 0.10, (p.time_s, ideal)
    assert predict(c, "all_reduce", size, Group(ranks=4, ranks_per_node=1)).algorithm == "ring"


def test_send_recv_has_no_fill() -> None:
    """One hop: lat + size / bw, nothing to fill (the old model added up to 2 MiB / bw)."""
    c = _tcp_ring_cluster(23.9e6)
    p = predict(c, "send_recv", 4 * units.MiB, Group(ranks=2, ranks_per_node=1), protocol="Simple")
    assert abs(p.time_s / (4 * units.MiB / 23.9e6) - 1) <= 0.02


def test_ring_step_wait_is_capped_in_time_not_bytes() -> None:
    """The per-step wait grows with a short step's transfer time and stops at RING_STEP_WAIT_US."""
    from slowlink.collectives import constants as c
    from slowlink.collectives.algorithms import ring_step_wait_s
    assert ring_step_wait_s(14, 1024.0, 1e9) == pytest.approx(13 * 1024 / 1e9)
    assert ring_step_wait_s(14, 2**20, 23.9e6) == pytest.approx(13 * c.RING_STEP_WAIT_US * 1e-6)
    assert ring_step_wait_s(1, 2**30, 1e6) == 0.0


def test_ll_trees_and_chains_fill_within_their_hop_latencies() -> None:
    from slowlink.collectives.algorithms import chain_fill_s, tree_fill_fraction

    for proto in ("LL", "LL128"):
        assert tree_fill_fraction(10, units.MiB, proto) == 0.0
        assert chain_fill_s(8, units.MiB, proto, 50e9) == 0.0
    assert tree_fill_fraction(10, units.MiB, "Simple") > 0  # Simple waits for whole chunks


def test_a_forced_ll_tree_at_1mib_on_8_nodes_is_latency_plus_bytes(make: Callable[..., Cluster]) -> None:
    # 8 H100 nodes, 8x400G: a 1 MiB tree/LL all_reduce is tens of microseconds of hops plus 1 MiB at LL's
    # rate, not milliseconds (it was 3 ms, 0.7 GB/s busbw, when LL paid a 32 KiB step per hop)
    c = make(nodes=8, nics=8)
    (tree,) = candidates(c, resolve(c, Group(64, 8, 1)), "all_reduce", units.MiB, ("tree",), ("LL",))
    assert tree.time_s == pytest.approx(tree.lat_s + units.MiB / tree.bw_bytes_s)
    assert tree.time_s < 300e-6


def test_nvls_tree_per_channel_cap_is_nccls_table() -> None:
    """NCCL 2.28+ tuning.cc perChMaxNVLSTreeBws: busBw <= heads x cap (Hopper 57.7 GB/s on 2 nodes, 45.5 on
    more), algbw = busBw x n / (2 (n - 1)); none on one node or without NVLS."""
    from slowlink.collectives.algorithms import nvls_tree_cap_bytes_s, nvls_tree_heads

    assert nvls_tree_heads(8, 8) == 8 and nvls_tree_heads(8, 4) == 4 and nvls_tree_heads(72, 72) == 32
    assert nvls_tree_cap_bytes_s("hopper", 16, 2, 8) * 2 * 15 / 16 == pytest.approx(8 * 57.7 * units.GB)
    assert nvls_tree_cap_bytes_s("hopper", 64, 8, 8) * 2 * 63 / 64 == pytest.approx(8 * 45.5 * units.GB)
    assert nvls_tree_cap_bytes_s("blackwell", 16, 2, 8) * 2 * 15 / 16 == pytest.approx(8 * 96.0 * units.GB)
    assert nvls_tree_cap_bytes_s("hopper", 8, 1, 8) == float("inf")
    assert nvls_tree_cap_bytes_s("ampere", 16, 2, 8) == float("inf")


def test_two_hgx_h100_nodes_nvls_tree_busbw_stops_at_heads_x_cap(make: Callable[..., Cluster]) -> None:
    """2 x 8 H100, 8 x 400G: NVLS-tree's NVLink stage (274.8 GB/s algbw at 8 GiB) is faster than NCCL's
    per-channel cap over its 8 heads allows (8 x 57.7 = 461.6 GB/s busbw), so the cap binds: busbw just under
    461.6 (latency and fills), where it was 510.6. Published: 440.6 (coreweave/nccl-tests PR 92). With 4 NICs,
    4 heads: the cap halves and NVLS-tree no longer wins."""
    size = 8 * units.GiB
    eight = predict(make(nodes=2, nics=8), "all_reduce", size)
    assert eight.algorithm == "nvls_tree"
    assert 0.97 * 461.6 < eight.busbw_bytes_s / units.GB <= 461.6
    four = predict(make(nodes=2, nics=4), "all_reduce", size, algorithm="nvls_tree")
    assert four.busbw_bytes_s / units.GB <= 4 * 57.7
    b200 = predict(make(nodes=2, nics=8, gpu="b200", link="nvlink5"), "all_reduce", size)
    assert b200.algorithm == "nvls_tree" and b200.busbw_bytes_s / units.GB < 8 * 96.0 * 0.9  # network-bound


def _nvl72(racks: int, speed: float) -> Cluster:
    return cluster_from_mapping({
        "name": "gb200", "nodes": 18 * racks, "gpus_per_node": 4, "gpu": "gb200",
        "scale_up": {"link": "nvlink5", "domain_gpus": 72},
        "nics": {"compute": {"per_node": 4, "speed_gbit_s": speed}},
        "fabric": {"transport": "infiniband", "topology": "rail-optimized", "tiers": 2},
    })


def test_nvls_tree_crosses_the_network_on_its_heads_nics_only() -> None:
    """NCCL 2.26.2 (connect.cc connectNvls: only head ranks join the inter-node trees; search.cc getNvlsNetDev:
    a head sends on the NIC its NVLS graph channel paired it with, ncclTopoSearchRecNet: one channel per head
    GPU, at most NCCL_MAX_NVLS_ARITY = 32). A GB200 NVL72 rack has 72 NICs and 32 heads; a GPU with two NICs
    heads once. On 20 racks of 4 x 100G per tray the heads' 32 NICs bind: algbw = 32 x NIC x 0.9 x 0.5 (the
    tree), not 72 x NIC x 0.9 x 0.5 (the model before, which left NVLS binding: ~440 GB/s algbw)."""
    from slowlink.collectives.algorithms import nvls_tree_net_share

    assert nvls_tree_net_share(72, 72) == pytest.approx(32 / 72)
    assert nvls_tree_net_share(8, 8) == 1.0 and nvls_tree_net_share(18, 18) == 1.0
    assert nvls_tree_net_share(2, 4) == 0.5  # two GPUs, two NICs each: two heads
    c = _nvl72(20, 100)
    links = resolve(c, Group(ranks=c.gpus, ranks_per_node=4))
    assert (links.ranks_per_domain, links.domain_nics, links.domains) == (72, 72, 20)
    nic = c.compute_nics.speed_bytes_s * c.fabric.transport.efficiency
    p = predict(c, "all_reduce", 16 * units.GiB, algorithm="nvls_tree")
    assert p.bottleneck.startswith("NIC")
    assert 0.85 * 32 * nic * 0.9 * 0.5 < p.algbw_bytes_s <= 32 * nic * 0.9 * 0.5  # less the tree fills
