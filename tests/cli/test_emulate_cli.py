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
