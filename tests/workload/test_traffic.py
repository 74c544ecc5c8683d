"""Exposure rules of workload/traffic.py: the SM contention of communication hidden behind compute."""

from __future__ import annotations

import pytest

from slowlink.collectives.constants import CHANNELS
from slowlink.workload.traffic import comm_sm_share, overlap_contention_s


def test_a_collective_holds_one_sm_per_channel() -> None:
    assert CHANNELS == 24  # the HGX A100 NCCL log the share is sourced from
    assert comm_sm_share(108) == pytest.approx(24 / 108)  # A100
    assert comm_sm_share(132) == pytest.approx(24 / 132)  # H100
    assert comm_sm_share(8) == 1.0  # never more than the whole GPU


def test_compute_longer_than_the_collective_loses_the_share_of_its_duration() -> None:
    assert overlap_contention_s(1.0, 10.0, 0.25) == pytest.approx(0.25)


def test_a_collective_longer_than_the_slowed_compute_adds_nothing() -> None:
    assert overlap_contention_s(10.0, 1.0, 0.25) == 0.0  # 1 s of compute at 75% ends at 1.33 s, long before


def test_between_the_two_the_window_ends_when_the_slowed_compute_does() -> None:
    # comm 4 s beside 3.5 s of compute at 75% speed: 3 s done at 4 s, the last 0.5 s at full speed
    assert overlap_contention_s(4.0, 3.5, 0.25) == pytest.approx(0.5)


def test_nothing_overlapped_costs_nothing() -> None:
    assert overlap_contention_s(0.0, 5.0, 0.25) == 0.0
    assert overlap_contention_s(5.0, 0.0, 0.25) == 0.0
