"""`validate emulated`'s library call tells its caller each phase, and tears down when a measurement fails."""

from __future__ import annotations

import pytest

from slowlink.emulate import net, validate
from slowlink.emulate.plan import build_plan
from slowlink.spec.cluster import load_cluster


def _fake_net(monkeypatch: pytest.MonkeyPatch, log: list[str]) -> None:
    monkeypatch.setattr(net, "up", lambda plan: log.append("net.up") or plan)
    monkeypatch.setattr(net, "down", lambda run_id=None: log.append("net.down") or [])


def test_each_phase_begins_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    log: list[str] = []
    _fake_net(monkeypatch, log)
    monkeypatch.setattr(validate, "measure_case", lambda *a: (log.append("measure") or 0.5, 0.4, 0.1, 0.1))
    c = load_cluster("examples/emulate-flat.yaml")
    plan = build_plan(c)
    rows = validate.validate(c, plan, ["all_reduce", "all_to_all"], 4 * 2**20, 1, on_step=log.append)
    assert len(rows) == 4
    assert log[0].startswith("bring-up") and log[1] == "net.up"
    assert log[2:] == ["all_reduce x 1 iterations", "measure", "all_to_all x 1 iterations", "measure",
                       "tear-down", "net.down"]


def test_a_failed_measurement_still_reports_tear_down(monkeypatch: pytest.MonkeyPatch) -> None:
    log: list[str] = []
    _fake_net(monkeypatch, log)

    def broken(*a: object) -> tuple[float, float, float, float]:
        raise RuntimeError("gloo")

    monkeypatch.setattr(validate, "measure_case", broken)
    c = load_cluster("examples/emulate-flat.yaml")
    with pytest.raises(RuntimeError):
        validate.validate(c, build_plan(c), ["all_reduce"], 4 * 2**20, 1, on_step=log.append)
    assert log[-2:] == ["tear-down", "net.down"]
