"""DDP and DiLoCo across two emulated sites (root and network namespaces): the step within 15% of the sites model's
and the long-haul bytes per step within 5%; DiLoCo's int8 pseudo-gradients a quarter of its fp32 bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from slowlink.emulate.plan import DEFAULT_SCALE
from slowlink.emulate.sites import validate_sites
from slowlink.spec.cluster import load_cluster

EX = Path(__file__).parents[2] / "examples"
pytestmark = [pytest.mark.netns]


def test_ddp_and_diloco_across_the_emulated_long_haul() -> None:
    v = validate_sites(load_cluster(EX / "emulate-two-site.yaml"), DEFAULT_SCALE, 500_000, 8, 4)
    ddp, diloco, int8 = v.runs
    assert (diloco.outer_dtype, int8.outer_dtype) == ("fp32", "int8")
    assert v.measured_rtt_s == pytest.approx(0.010, rel=0.25)  # the relay's 5 ms each way, plus its tick
    for r in (ddp, diloco):
        assert abs(r.step_error) < 0.15, r
    for r in (ddp, diloco, int8):
        assert abs(r.bytes_error) < 0.05, r
    assert diloco.bytes_per_step == pytest.approx(ddp.bytes_per_step / 4, rel=0.05)  # 1/H of DDP's
    assert int8.bytes_per_step == pytest.approx(diloco.bytes_per_step / 4, rel=0.05)  # a byte, not four
    assert int8.step_s < diloco.step_s < ddp.step_s / 2
