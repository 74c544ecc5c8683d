"""Rendering of the emulate area: the plan summary printed by ``slowlink emulate up|status`` lives in
report/, and the emulation library returns the typed :class:`~slowlink.emulate.plan.Plan` only."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import slowlink.emulate.plan as plan_module
from slowlink.cli.main import app
from slowlink.emulate.plan import build_plan
from slowlink.report.emulate import plan_summary
from slowlink.spec.cluster import load_cluster

EX = Path(__file__).parents[2] / "examples"


def test_summary_names_nodes_links_rates_and_impairments() -> None:
    plan = build_plan(load_cluster(EX / "emulate-2leaf.yaml"), scale=0.004, run_id="abcd",
                      delay_s={"up0": 0.005}, loss={"n1": 0.01})
    lines = plan_summary(plan).splitlines()
    assert lines[0] == "emulation abcd: fat-tree, 4 nodes, 1 rail(s), scale 0.004"
    assert "  node 0: sl-abcd-n0 10.213.0.1" in lines
    # 25 Gbit/s x 0.004 = 100 Mbit/s per NIC; the 2:1 leaf uplink carries 2 nodes' worth / 2 = 100 Mbit/s.
    assert "  link n1: sl-abcd-n1 <-> sl-abcd-leaf0 100 Mbit/s, 1.00% loss" in lines
    assert "  link up0: sl-abcd-leaf0 <-> sl-abcd-spine 100 Mbit/s, +5 ms" in lines
    assert len(lines) == 1 + len(plan.nodes) + len(plan.links)


def test_the_library_renders_nothing() -> None:
    """STYLE.md 7: the plan module builds data; the text is report/'s."""
    assert not hasattr(plan_module, "plan_summary")


def test_status_prints_the_report_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    from slowlink.emulate import net

    plan = build_plan(load_cluster(EX / "emulate-flat.yaml"), run_id="beef")
    monkeypatch.setattr(net, "current", lambda: plan)
    res = CliRunner().invoke(app, ["emulate", "status"])
    assert res.exit_code == 0, res.output
    assert res.output.strip() == plan_summary(plan)
