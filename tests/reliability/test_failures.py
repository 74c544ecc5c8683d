"""The failure model: Llama 3's counts as rates, MTTF ~ 1 / N, detection by failure kind, overrides."""

from __future__ import annotations

import pytest

from slowlink.reliability.failures import default_model, failure_model
from slowlink.spec.reliability import Reliability
from slowlink.units import parse_count


def test_default_mix_reproduces_llama3s_interruption_count() -> None:
    # Dubey et al. 2024, Sec. 3.3.4: 419 unexpected interruptions in 54 days on 16,384 GPUs.
    m = default_model()
    assert m.job_rate_per_h(16384, 8) * 54 * 24 == pytest.approx(419)
    assert m.planned_rate_per_h(16384, 8) * 54 * 24 == pytest.approx(47)
    assert m.per_1000_node_days() == pytest.approx(419 / (2048 * 54) * 1000)
    # Table 5: GPU parts (faulty GPU, HBM3, SRAM, GSP, SDC, thermal) are 268 of the 419.
    assert m.shares(16384, 8)["gpu"] == pytest.approx(268 / 419)


def test_mttf_falls_as_one_over_the_job_size() -> None:
    m = default_model()
    assert m.mttf_h(1024, 8) == pytest.approx(16 * m.mttf_h(16384, 8))
    # GPU parts scale per GPU, the rest per node: 4-GPU nodes have twice the nodes for the same GPUs.
    assert m.mttf_h(1024, 4) < m.mttf_h(1024, 8)


def test_detection_weights_each_kind_by_its_share() -> None:
    m = default_model()
    # Table 5 by detection kind: hangs are the NCCL watchdog timeouts; a lost link or host (switch/cable, NIC,
    # unplanned host maintenance, power supply, chassis, IO board, CPU, system memory) fails its peers' queue
    # pairs; the rest (GPU parts, software, SSD) crash their rank.
    hang, transport = 7 / 419, (35 + 7 + 32 + 3 + 2 + 2 + 2 + 2) / 419
    crash = 1 - hang - transport
    expected = hang * 600 + transport * m.transport_detect_s + crash * 0.1
    assert m.detect_s(16384, 8) == pytest.approx(expected)
    # NCCL's defaults IB_TIMEOUT 20, IB_RETRY_CNT 7: 4.096 us x 2^20 x (1 + 7).
    assert m.transport_detect_s == pytest.approx(34.36, abs=0.01)


def test_overrides_rescale_the_mix_and_replace_recovery_times() -> None:
    spec = Reliability.of(failures_per_1000_node_days=6.5, planned_per_1000_node_days=0,
                           restart_overhead_s=60, hang_timeout_s=120, crash_detect_s=5, transport_detect_s=9)
    m = failure_model(spec)
    assert m.per_1000_node_days() == pytest.approx(6.5)
    assert m.shares(16384, 8) == pytest.approx(default_model().shares(16384, 8))
    assert m.planned_rate_per_h(16384, 8) == 0
    assert m.restart_s(16384) == 60 and m.restart_s(64) == 60  # the override replaces the model at any size
    assert m.hang_timeout_s == 120 and m.crash_detect_s == 5 and m.transport_detect_s == 9


def test_reschedule_adds_to_the_restart_model() -> None:
    base = default_model()
    m = failure_model(Reliability.of(reschedule_s=45))
    assert m.restart_s(16384) == pytest.approx(base.restart_s(16384) + 45)


@pytest.mark.parametrize(("text", "value"), [("15T", 15e12), ("15e12", 15e12), ("2.5B", 2.5e9), (300, 300.0)])
def test_parse_count(text: str | int, value: float) -> None:
    assert parse_count(text) == value


@pytest.mark.parametrize("bad", ["15X", "-3", "0", "", True])
def test_parse_count_refuses(bad: str | bool) -> None:
    with pytest.raises(ValueError, match="must be"):
        parse_count(bad)
