"""all_to_all's per-peer cost: NCCL posts a send and a receive per peer and serves 128 peers a batch wave.

Sources (constants.P2P_CHANNELS): NCCL init.cc ncclP2pSchedule (n - 1 rounds), graph/paths.cc
ncclTopoComputeP2pChannels (32 p2p channels, 2 per network peer), enqueue.cc addWorkBatchToPlan (at most
NCCL_MAX_DEV_WORK_P2P_PER_BATCH = 8 p2p works per channel batch); the message latency is tuning.cc hwLat
(NET, ring, LL: 2.7 us) and the launch baseLat (ring, LL: 6.6 us).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from slowlink import units
from slowlink.collectives import Group, predict
from slowlink.collectives.algorithms import p2p_waves
from slowlink.spec.cluster import Cluster


def test_waves_of_128_peers() -> None:
    assert [p2p_waves(p) for p in (1, 7, 127, 128, 129, 16383)] == [1, 1, 1, 1, 2, 128]


def test_16k_ranks_1mib_is_latency_bound(make: Callable[..., Cluster]) -> None:
    # 2,048 nodes x 8 H100, 8 x 400G NDR, non-blocking: 64 B per peer, LL. It was 98.5 us, 9% latency,
    # ~6 ns per message; now 6.6 us launch + 128 waves x 2.7 us = 352.2 us of latency.
    c = make(nodes=2048, nics=8, tiers=3, oversubscription=1)
    p = predict(c, "all_to_all", units.MiB, Group(ranks=16384, ranks_per_node=8))
    assert p.protocol == "LL"
    latency_us = 6.6 + 128 * 2.7
    assert p.time_s > latency_us * units.US > 0.5 * p.time_s
    assert "latency-bound" in p.reason


def test_one_node_all_to_all_pays_one_wave(make: Callable[..., Cluster]) -> None:
    # 7 peers fit one wave: a single NVLink hop as before
    c = make(nodes=1, nics=8)
    small = predict(c, "all_to_all", 8 * units.KiB, Group(ranks=8, ranks_per_node=8))
    assert small.time_s == pytest.approx((6.6 + 0.6) * units.US, rel=0.05)
