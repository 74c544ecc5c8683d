"""`find-slow --emulated`: one link at half rate and one node +5 ms, found by name (root only, ~40 s)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slowlink.cli.main import app
from slowlink.emulate import net

EX = Path(__file__).parents[2] / "examples"
pytestmark = [pytest.mark.netns, pytest.mark.slow]


def test_find_slow_names_the_link_and_the_node() -> None:
    run = f"sw{os.getpid() % 10000:04d}"
    res = CliRunner().invoke(app, ["find-slow", "--emulated", str(EX / "straggler-emulate.yaml"), "--json",
                                   "--run-id", run])
    assert res.exit_code == 0, res.output
    js = json.loads(res.output[res.output.index("{"):])
    assert {(s["kind"], s["id"]) for s in js["suspects"]} == {("link", "n1"), ("node", "n4")}
    link = next(s for s in js["suspects"] if s["kind"] == "link")
    node = next(s for s in js["suspects"] if s["kind"] == "node")
    assert 0.35 < link["slowdown"] < 0.65 and 0.004 < node["slowdown"] < 0.007
    assert js["measured_slowdown"] > 0.5  # the whole ring is paced by the half-rate link
    flow = js["predicted"]["flow"]["degraded_s"]
    assert flow == pytest.approx(js["measured_degraded_s"], rel=0.25)
    assert js["predicted_from_found_s"]["flow"] == pytest.approx(js["measured_degraded_s"], rel=0.25)
    assert js["wall_s"] < 120
    assert len(js["rank_median_s"]["healthy"]) == len(js["rank_median_s"]["degraded"]) == 6
    assert not [ns for ns in net.list_namespaces() if ns.startswith(f"sl-{run}-")]
