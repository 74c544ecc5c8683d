"""A plain tree over two domains: twice the network, but never past NCCL's per-channel tree ceiling.

Sources: NCCL tuning.cc ncclTopoTuneModel, ``busBw = min(busBw*.92, nChannels*perChMaxTreeBw)`` with
perChMaxTreeBws Ampere {24.0, 23.6, 17.8} (N1/N2/N4); NVIDIA/nccl-tests issue 175 (2 x 8 A100, 4 x 200G HDR
a node): 86 GB/s all_reduce busbw.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from slowlink import units
from slowlink.collectives import predict
from slowlink.collectives.algorithms import tree, two_domain_tree_cap_bytes_s
from slowlink.collectives.links import resolve
from slowlink.collectives.model import default_group
from slowlink.spec.cluster import Cluster


def _a100_2node(make: Callable[..., Cluster]) -> Cluster:
    return make(nodes=2, gpu="a100-80gb", link="nvlink3", nics=4, speed=200)


def test_cap_is_one_channel_per_nic_at_the_two_node_ceiling(make: Callable[..., Cluster]) -> None:
    links = resolve(_a100_2node(make), default_group(_a100_2node(make)))
    assert two_domain_tree_cap_bytes_s(links, "ampere") == pytest.approx(4 * 23.6 * units.GB)
    t = tree(links, "all_reduce", units.GiB, "Simple", "ampere")
    assert t is not None and t.bw_bytes_s == pytest.approx(0.5 * 4 * 23.6 * units.GB)   # 47.2 GB/s algbw


def test_two_a100_nodes_with_4_hdr_run_the_ring(make: Callable[..., Cluster]) -> None:
    # was tree/LL128 at 151 GB/s busbw (2x the NICs); the ring binds on the NICs: 4 x 24 GB/s at most
    p = predict(_a100_2node(make), "all_reduce", units.GiB)
    assert p.algorithm == "ring"
    assert p.busbw_bytes_s <= 4 * 25 * units.GB
    assert p.busbw_bytes_s / units.GB == pytest.approx(86.0, rel=0.15)   # nccl-tests #175


def test_hopper_two_nodes_keep_the_two_node_gain(make: Callable[..., Cluster]) -> None:
    # 8 x 400G a node: the plain tree's ceiling binds (2 x 50 x .92 = 92 > 41.4 GB/s a channel), but NVLS-tree,
    # with its own two-node doubling and cap, is what runs: busbw above the NICs (coreweave h100_2node: 440)
    c = make(nodes=2, nics=8)
    p = predict(c, "all_reduce", 8 * units.GiB)
    assert p.algorithm == "nvls_tree"
    assert p.busbw_bytes_s > 8 * 50 * units.GB * 0.92
