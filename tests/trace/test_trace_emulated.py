"""The loop on the emulated cluster (root): a 2-node bench train traced at 200 Mbit/s predicts the step at
50 Mbit/s through plan --trace's calibration; the round trip returns the traced step. On this project's shared
2-core machine other jobs' load moves a step by up to a third between two runs minutes apart (docs/trace.md's
table), so the prediction is held to 35% here and the documented table carries the measured errors."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytestmark = [pytest.mark.netns, pytest.mark.slow, pytest.mark.torch]
sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))


def test_a_slower_link_predicted_from_a_trace(tmp_path: Path) -> None:
    from trace_emulated import case

    got = case(200, 50, tmp_path)
    assert abs(got["round_trip_error"]) < 0.05
    assert got["predicted_b_s"] > 1.5 * got["traced_a_s"]  # a quarter of the link rate: the all_reduce dominates
    assert abs(got["error"]) < 0.35, got
