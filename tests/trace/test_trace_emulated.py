"""The loop on the emulated cluster (root): a 2-node bench train traced at 200 Mbit/s predicts the step at
50 Mbit/s through plan --trace's calibration; the round trip returns the traced step. On this project's shared
2-core machine other jobs' load moves a step by up to a third between two runs minutes apart (docs/trace.md's
table; 41% once in a loaded minute), so the test holds the calibration's round trip and the prediction's
direction, and the documented table carries the measured errors (on a quiet machine, with the measured compute:
200 -> 50 within 5% in ten runs; 50 -> 200 within 15% in eight of ten)."""

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
    assert got["predicted_b_s"] > got["traced_a_s"], got  # a quarter of the link rate: predicted slower
    # The measured step at 50 Mbit/s is not asserted: with other tests' processes still winding down it moved by
    # a third between runs of the full suite (it failed once, passed alone three times); docs/trace.md's table
    # carries the measured errors.
