"""The restart model: its parts from failures.yaml, growing with the job's ranks through the all-to-one
connections; the RDMA transport timeout that detects a lost host or link."""

from __future__ import annotations

import pytest

from slowlink.reliability.failures import default_model
from slowlink.reliability.restart import RestartModel, transport_timeout_s


def test_default_parts_are_the_sourced_values() -> None:
    r = default_model().restart
    # failures.yaml: import torch measured here, NCCL init of one 8-H100 node (NVIDIA/nccl#534), the libuv
    # TCPStore's 100 s at 98,304 ranks (PyTorch tutorial), two all-to-one phases, no reschedule.
    assert (r.process_start_s, r.nccl_init_base_s, r.store_init_s, r.store_init_ranks) == (1.39, 2.46, 100, 98304)
    assert r.star_phases == 2 and r.reschedule_s == 0 and r.override_s is None


def test_connections_reproduce_the_published_store_point_and_scale_linearly() -> None:
    r = default_model().restart
    assert r.connect_s(98304) == pytest.approx(100.0)
    assert r.connect_s(16384) == pytest.approx(100.0 / 6)
    parts = r.parts(16384)
    assert parts["all_to_one_connect_s"] == pytest.approx(2 * 100.0 / 6)
    assert r.restart_s(16384) == pytest.approx(sum(parts.values()))


def test_restart_grows_with_the_job() -> None:
    r = default_model().restart
    small, large = r.restart_s(64), r.restart_s(16384)
    assert small < 5 < 30 < large  # one node's worth of start-up vs 16K ranks' connections
    assert large - small == pytest.approx(2 * (16384 - 64) * 100 / 98304)


def test_override_replaces_the_sum() -> None:
    r = RestartModel(10, 1, 2, 100, 1000, 2, override_s=7.0)
    assert r.restart_s(10**6) == 7.0


@pytest.mark.parametrize(("timeout", "retries", "seconds"), [(20, 7, 34.36), (18, 7, 8.59), (14, 7, 0.537)])
def test_transport_timeout(timeout: int, retries: int, seconds: float) -> None:
    # NCCL's defaults over its versions: IB_TIMEOUT 14 (older), 18, 20 (current), IB_RETRY_CNT 7.
    assert transport_timeout_s(timeout, retries) == pytest.approx(seconds, rel=1e-3)
