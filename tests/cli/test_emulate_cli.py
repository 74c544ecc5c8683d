"""The emulate CLI: bad input exits 2 with a message and no traceback."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from slowlink.cli.main import app


@pytest.mark.skipif(os.geteuid() == 0, reason="checks the message shown to non-root users")
def test_up_needs_root() -> None:
    r = CliRunner().invoke(app, ["emulate", "up", "examples/emulate-2leaf.yaml"])
    assert r.exit_code == 2 and "needs root" in r.output and "Traceback" not in r.output


def test_up_missing_file(tmp_path: object) -> None:
    r = CliRunner().invoke(app, ["emulate", "up", "nope.yaml"])
    assert r.exit_code == 2 and "Traceback" not in r.output


def test_status_without_emulation(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    from slowlink.emulate import net
    monkeypatch.setattr(net, "STATE_DIR", tmp_path)
    r = CliRunner().invoke(app, ["emulate", "status"])
    assert r.exit_code == 2 and "no emulation is up" in r.output


def test_validate_emulated_bad_op_exits_2(monkeypatch: pytest.MonkeyPatch) -> None:
    from slowlink.emulate import net
    monkeypatch.setattr(net, "check_root", lambda: None)
    r = CliRunner().invoke(app, ["validate", "emulated", "examples/emulate-flat.yaml", "--ops", "bcast"])
    assert r.exit_code == 2 and "ops/iters" in r.output and "Traceback" not in r.output


def test_up_bad_delay_exits_2(monkeypatch: pytest.MonkeyPatch) -> None:
    from slowlink.emulate import net
    monkeypatch.setattr(net, "check_root", lambda: None)
    r = CliRunner().invoke(app, ["emulate", "up", "examples/emulate-flat.yaml", "--delay", "n0=abc"])
    assert r.exit_code == 2 and "LINK=NUMBER" in r.output and "Traceback" not in r.output


def _fake_validate(calls: list[str]) -> object:
    from slowlink.emulate.validate import Row

    def validate(cluster: object, plan: object, ops: list[str], size_bytes: float, iters: int,
                 on_step: object = None) -> list[Row]:
        assert callable(on_step)
        for phase in ("bring-up", *ops, "tear-down"):
            on_step(phase)
            calls.append(phase)
        return [Row("flat all_reduce 4MiB", 0.5, 0.4, "flow", -0.2, 0.45, -0.11, 0.9, 0.6, True)]
    return validate


@pytest.mark.parametrize("drawn", [False, True])
def test_validate_emulated_progress_goes_to_stderr_and_json_stays_valid(monkeypatch: pytest.MonkeyPatch,
                                                                        drawn: bool) -> None:
    """Each phase reaches the bar; with the bar drawn (as on a terminal) stdout is still only JSON."""
    import json

    from slowlink import progress
    from slowlink.emulate import net, validate

    calls: list[str] = []
    monkeypatch.setattr(net, "check_root", lambda: None)
    monkeypatch.setattr(validate, "validate", _fake_validate(calls))
    monkeypatch.setattr(progress, "_draws", lambda console, enabled: drawn and enabled)
    r = CliRunner().invoke(app, ["validate", "emulated", "examples/emulate-flat.yaml", "--json"])
    assert r.exit_code == 0, r.output
    assert calls == ["bring-up", "all_reduce", "all_to_all", "tear-down"]
    assert json.loads(r.stdout)[0]["fidelity"] == "flow"
    assert ("validate" in r.stderr or "tear-down" in r.stderr) == drawn


def test_validate_emulated_table_and_cpu_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    from slowlink.emulate import net, validate

    monkeypatch.setattr(net, "check_root", lambda: None)
    monkeypatch.setattr(validate, "validate", _fake_validate([]))
    r = CliRunner().invoke(app, ["validate", "emulated", "examples/emulate-flat.yaml"])
    assert r.exit_code == 0, r.output
    assert "-20.0%" in r.output and "CPU-LIMITED" in r.output and "lower --scale" in r.output


def test_the_default_size_fits_a_six_node_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """4MiB over 6 ranks is no whole number of float32 elements per rank: the project's own 6-node example was
    refused with its default size (issue 39); the default is rounded down, a size given is still checked."""
    from slowlink.emulate import net, validate

    sizes: list[float] = []

    def fake(cluster: object, plan: object, ops: list[str], size_bytes: float, iters: int,
             on_step: object = None) -> list[object]:
        sizes.append(size_bytes)
        return []

    monkeypatch.setattr(net, "check_root", lambda: None)
    monkeypatch.setattr(validate, "validate", fake)
    r = CliRunner().invoke(app, ["validate", "emulated", "examples/emulate-2leaf-3to1.yaml", "--json"])
    assert r.exit_code == 0, r.output
    assert sizes == [4 * 2**20 - 4 * 2**20 % 24] and sizes[0] % 24 == 0
    r = CliRunner().invoke(app, ["validate", "emulated", "examples/emulate-2leaf-3to1.yaml", "--size", "4MiB"])
    assert r.exit_code == 2 and "must be a multiple of 4 B x 6 ranks = 24 B" in r.output
