"""Bytes across the sites: the hierarchical all-reduce by hand, DiLoCo's 1/H, the published ratios."""

from __future__ import annotations

import pytest

from slowlink.errors import SpecError
from slowlink.sites.traffic import (
    OUTER_DTYPE_BYTES,
    hierarchical_cross_site_bytes,
    ring_cross_site_bytes,
    sync_traffic,
)
from slowlink.spec.workload import Sync

GB = 1e9


def test_hierarchical_cross_site_bytes_by_hand() -> None:
    # Two sites of 16 ranks each, S = 1 GB. Reduce-scatter inside: each rank keeps 1/16 GB, summed over its site.
    # All-reduce across: each rank rings its 1/16 GB with its one peer in the other site: 2 (2-1)/2 x 1/16 GB out.
    # All-gather inside. Leaving each site: 16 ranks x 1/16 GB = 1 GB, whatever the ranks per site.
    per_rank = 2 * (2 - 1) / 2 * (GB / 16)
    assert hierarchical_cross_site_bytes(GB, 2) == pytest.approx(16 * per_rank) == pytest.approx(GB)
    # Three sites: each rank's share rings over 3 peers, 2 (3-1)/3 = 4/3 of it leaves its site.
    assert hierarchical_cross_site_bytes(GB, 3) == pytest.approx(4 / 3 * GB)


def test_a_flat_ring_sends_twice_as_much_over_two_sites() -> None:
    # 32 ranks, one ring edge leaves each site carrying the ring's 2 (n-1)/n x S = 62/32 GB
    assert ring_cross_site_bytes(GB, 32, 2) == pytest.approx(62 / 32 * GB)
    assert ring_cross_site_bytes(GB, 32, 2) / hierarchical_cross_site_bytes(GB, 2) == pytest.approx(1.9375)


def test_a_cross_site_reduction_needs_two_sites() -> None:
    with pytest.raises(SpecError, match=r"sites \(1\) >= 2"):
        hierarchical_cross_site_bytes(GB, 1)


def test_diloco_bytes_per_step_fall_as_one_over_h() -> None:
    params = 4e9  # one DP rank's parameters
    per_step = {h: sync_traffic(Sync("diloco", h), 0.0, params, 32, 2, 2, 16).bytes_per_step for h in (1, 10, 100, 500)}
    for h, b in per_step.items():
        assert b * h == pytest.approx(per_step[1])
    # fp32 pseudo-gradient at H = 1: the hierarchical all-reduce of 4e9 x 4 B, for each of the 2 DP groups
    assert per_step[1] == pytest.approx(2 * hierarchical_cross_site_bytes(params * 4, 2))


@pytest.mark.parametrize(("sync", "ratio"), [
    (Sync("diloco", 500, outer_dtype="fp32"), 500),  # DiLoCo: 'communicating 500 times less' (fp32, H = 500)
    (Sync("diloco", 100, outer_dtype="int8"), 400),  # INTELLECT-1: H = 100 x fp32 -> int8 = 400x
    (Sync("streaming-diloco", 100, outer_dtype="fp4", fragments=4), 800),  # average bytes: H x 32 / 4 bits
])
def test_published_reductions_against_fp32_data_parallel(sync: Sync, ratio: float) -> None:
    params = 1e9
    ddp = sync_traffic(Sync("hierarchical"), params * 4, params, 32, 2, 1, 16)
    assert ddp.bytes_per_step / sync_traffic(sync, params * 4, params, 32, 2, 1, 16).bytes_per_step == \
        pytest.approx(ratio)


def test_streaming_sends_one_fragment_per_sync() -> None:
    whole = sync_traffic(Sync("diloco", 100, outer_dtype="fp4"), 0.0, 1e9, 8, 2, 1, 4)
    frag = sync_traffic(Sync("streaming-diloco", 100, outer_dtype="fp4", fragments=4), 0.0, 1e9, 8, 2, 1, 4)
    assert frag.bytes_per_sync == pytest.approx(whole.bytes_per_sync / 4)
    assert frag.bytes_per_step == pytest.approx(whole.bytes_per_step)
    assert OUTER_DTYPE_BYTES["fp4"] == 0.5 and OUTER_DTYPE_BYTES["int8"] == 1.0
