"""Behaviour of predict(): monotone busbw, saturation, algorithm choice, oversubscription, RoCE."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from slowlink import units
from slowlink.collectives import OPS, Group, predict
from slowlink.errors import SpecError
from slowlink.spec.cluster import Cluster

SIZES = [2.0**k for k in range(10, 34, 2)]


@pytest.mark.parametrize("op", OPS)
def test_busbw_rises_with_size(ref: Cluster, op: str) -> None:
    bw = [predict(ref, op, s).busbw_bytes_s for s in SIZES]
    assert all(b2 >= b1 * 0.98 for b1, b2 in itertools.pairwise(bw)), bw


def test_ref_saturates_at_the_nic(ref: Cluster) -> None:
    """ref-64gpu: one 400G NDR NIC per node for 8 GPUs, so ~47 GB/s busbw (0.94 x 50) and the NIC named."""
    p = predict(ref, "all_reduce", 8 * units.GiB)
    assert "NIC" in p.bottleneck and "ib-ndr" in p.bottleneck
    nic = 400 * units.Gbit * 0.94
    assert 0.9 * nic <= p.busbw_bytes_s <= 1.15 * nic


def test_single_node_saturates_at_nvlink(make: Callable[..., Cluster]) -> None:
    c = make(nodes=1, nics=8)
    p = predict(c, "all_gather", 8 * units.GiB)
    assert p.bottleneck.startswith("scale-up nvlink4")
    assert p.busbw_bytes_s == pytest.approx(0.8 * 450 * units.GB, rel=0.02)


def test_small_messages_many_nodes_use_tree_or_low_latency_protocol(make: Callable[..., Cluster]) -> None:
    c = make(nodes=64)
    p = predict(c, "all_reduce", 8 * units.KiB, Group(64, 1))
    assert p.algorithm == "tree" and p.protocol == "LL"


def test_large_messages_use_ring_or_nvls(make: Callable[..., Cluster]) -> None:
    assert predict(make(nodes=1), "all_reduce", 4 * units.GiB).algorithm == "nvls"
    assert predict(make(nodes=1, link="nvlink3", gpu="a100-80gb"), "all_reduce",
                   4 * units.GiB).algorithm == "ring"


def test_nvls_only_where_the_switch_has_sharp(make: Callable[..., Cluster]) -> None:
    c = make(nodes=1, link="nvlink3", gpu="a100-80gb")
    with pytest.raises(SpecError, match=r"algorithm \('nvls'\) cannot run all_reduce on 8 ranks here: scale-up "
                       r"nvlink3 has no NVLink SHARP .*; these can: .*ring/Simple"):
        predict(c, "all_reduce", units.GiB, algorithm="nvls")


def test_nvls_across_domains_points_to_nvls_tree(make: Callable[..., Cluster]) -> None:
    with pytest.raises(SpecError, match=r"ranks span 8 \(nvls_tree crosses them\); these can: .*nvls_tree/Simple"):
        predict(make(nodes=8), "all_reduce", units.GiB, algorithm="nvls")
    with pytest.raises(SpecError, match=r"algorithm \('nvls_tree'\), protocol \('LL'\) cannot run all_reduce"):
        predict(make(nodes=8), "all_reduce", units.GiB, algorithm="nvls_tree", protocol="LL")


def test_oversubscription_only_hits_groups_that_cross_the_tier(make: Callable[..., Cluster]) -> None:
    flat = make(nodes=128, switch_radix=64, oversubscription=4)
    fast = make(nodes=128, switch_radix=64, oversubscription=1)
    small = Group(ranks=8 * 16, ranks_per_node=8)    # 16 nodes: under one 51-port leaf
    big = Group(ranks=8 * 128, ranks_per_node=8)     # 128 nodes: 3 leaves of 51 nodes
    s = 4 * units.GiB
    for op in ("all_reduce", "all_to_all"):
        assert predict(flat, op, s, small).time_s == pytest.approx(predict(fast, op, s, small).time_s)
    # A ring leaves each leaf once per channel: 1 NIC's worth against 51 / 4 NICs of uplink: no slowdown.
    ring = [predict(c, "all_reduce", s, big, algorithm="ring") for c in (flat, fast)]
    assert ring[0].time_s == pytest.approx(ring[1].time_s)
    assert "tier" not in ring[0].bottleneck
    # all_to_all is bisection-bound: leaf 0 (408 of 1024 ranks) sends 616/1024 of its members' bytes out
    # through 51/4 NICs of uplink while each node's NIC sends 1016/1024: 4 x 0.6 / 0.99 x 0.94 = 2.28x.
    a2a = [predict(c, "all_to_all", s, big) for c in (flat, fast)]
    bw_term = [p.time_s for p in a2a]
    assert bw_term[0] / bw_term[1] == pytest.approx(4 * 408 * 616 / 1024 / 51 / (8 * 1016 / 1024) * 0.94, rel=0.02)
    assert "tier 0 (leaf uplinks, 4:1)" in a2a[0].bottleneck
    assert "; the leaf uplinks (tier 0, 4:1) carry its crossing traffic" in a2a[0].reason


def test_untuned_roce_is_slower_than_tuned(make: Callable[..., Cluster]) -> None:
    tuned = make(transport="roce", lossless=True)
    untuned = make(transport="roce", lossless=False)
    t, u = (predict(c, "all_reduce", units.GiB) for c in (tuned, untuned))
    assert u.time_s > 1.2 * t.time_s
    assert "tail" in u.reason


def test_groups_per_node_share_the_nic(ref: Cluster) -> None:
    one = predict(ref, "all_reduce", units.GiB, Group(8, 1, 1))
    eight = predict(ref, "all_reduce", units.GiB, Group(8, 1, 8))
    assert eight.busbw_bytes_s == pytest.approx(one.busbw_bytes_s / 8, rel=0.05)


def test_bad_groups_are_rejected(ref: Cluster) -> None:
    with pytest.raises(SpecError, match=r"ranks \(65\) must be <= the cluster's GPUs"):
        predict(ref, "all_reduce", 1.0, Group(65, 8))
    with pytest.raises(SpecError, match=r"ranks_per_node \(9\)"):
        predict(ref, "all_reduce", 1.0, Group(16, 9))
    with pytest.raises(SpecError, match="protocol"):
        predict(ref, "all_reduce", 1.0, protocol="LL64")


def test_one_rank_costs_nothing(ref: Cluster) -> None:
    assert predict(ref, "all_reduce", units.GiB, Group(1, 1)).time_s == 0.0


def test_json_keys(ref: Cluster) -> None:
    j = predict(ref, "all_gather", units.MiB).to_json()
    for key in ("size_bytes", "time_s", "algbw_gbyte_s", "busbw_gbyte_s", "algorithm", "protocol", "ranks",
                "bottleneck", "reason"):
        assert key in j
    assert j["algbw_gbyte_s"] * units.GB * j["time_s"] == pytest.approx(units.MiB)


def test_pod_boundary_ratio_applies_only_to_traffic_that_crosses_pods(make: Callable[..., Cluster]) -> None:
    """Llama 3 style: 3 tiers, [1, 1, 7], 3072-GPU pods (arXiv 2407.21783 sec. 3.3.1)."""
    c = make(nodes=1024, nics=8, topology="rail-optimized", tiers=3, oversubscription=[1, 1, 7],
             pod_gpus=3072)
    s = 4 * units.GiB
    inside = predict(c, "all_to_all", s, Group(ranks=2048, ranks_per_node=8))
    across = predict(c, "all_to_all", s, Group(ranks=8192, ranks_per_node=8))
    assert "tier" not in inside.bottleneck
    assert "tier 1 (pod uplinks, 7:1)" in across.bottleneck
    assert across.busbw_bytes_s < inside.busbw_bytes_s / 3
    # The DP rings of the same job cross each pod boundary once per channel: the 7:1 costs them nothing.
    ring = predict(c, "all_reduce", s, Group(ranks=1024, ranks_per_node=1, groups_per_node=8), algorithm="ring")
    assert "tier" not in ring.bottleneck


def test_slow_transport_latency_scales_small_messages(make: Callable[..., Cluster]) -> None:
    ib = predict(make(nodes=8), "all_reduce", 8 * units.KiB)
    eth = predict(make(nodes=8, transport="ethernet", lossless=False, speed=100), "all_reduce", 8 * units.KiB)
    # 14 network hops of 64 at 50 us (kernel TCP) instead of 14 us: the LL ring's latency grows 1.87x.
    assert eth.time_s > 1.8 * ib.time_s


@pytest.mark.parametrize("op", ["all_to_all", "send_recv"])
def test_a_forced_algorithm_on_a_point_to_point_op_is_refused(ref: Cluster, op: str) -> None:
    """NCCL_ALGO applies to the collectives only; all_to_all / send_recv are p2p (collectives/ops.py)."""
    with pytest.raises(SpecError, match=rf"algorithm \('ring'\) does not apply to {op}"):
        predict(ref, op, 1 * units.MiB, algorithm="ring")
    assert predict(ref, op, 1 * units.MiB).time_s > 0  # without one it runs


@pytest.mark.parametrize(("op", "ranks", "size", "proto"), [
    ("send_recv", 64, 16 * units.KiB, "LL"), ("send_recv", 64, 16 * units.KiB + 1, "Simple"),
    ("all_to_all", 64, 64 * 16 * units.KiB, "LL"), ("all_to_all", 64, 64 * 16 * units.KiB + 64, "Simple"),
    ("all_to_all", 8, 1 * units.MiB, "Simple"), ("all_to_all", 64, 8 * units.GiB, "Simple"),
])
def test_point_to_point_runs_ll_up_to_the_p2p_threshold_per_peer(ref: Cluster, op: str, ranks: int, size: float,
                                                                 proto: str) -> None:
    """NCCL picks a p2p protocol by bytes per peer against P2P_LL_THRESHOLD (16 KiB; src/enqueue.cc), not by the
    tuning model's fastest: LL128 never, even where the model would price it fastest."""
    assert predict(ref, op, size, Group(ranks, 8)).protocol == proto


def test_point_to_point_never_runs_ll128(ref: Cluster) -> None:
    for op in ("send_recv", "all_to_all"):
        assert {predict(ref, op, s).protocol for s in SIZES} == {"LL", "Simple"}
        with pytest.raises(SpecError, match=rf"protocol \('LL128'\) does not apply to {op}: .*never LL128"):
            predict(ref, op, units.MiB, protocol="LL128")
        assert predict(ref, op, units.MiB, protocol="Simple").protocol == "Simple"  # a forced LL or Simple runs


def test_a_forced_algorithm_still_applies_to_the_collectives(ref: Cluster) -> None:
    for op in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"):
        assert predict(ref, op, 1 * units.MiB, algorithm="ring").algorithm == "ring"
