"""Runs on one host: `emulate down RUN` removes that run only, a run whose owner (a drill) died is removed by the
next start or by `down`, and a host with several runs needs one named (no namespace is made: ip is faked)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slowlink.cli.main import app
from slowlink.emulate import net


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Three runs: aa kept up (owner 0), bb owned by a process that is gone, cc with no state file here."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    monkeypatch.setattr(net, "STATE_DIR", tmp_path)
    (tmp_path / "aa.json").write_text(json.dumps({"owner_pid": 0}))
    (tmp_path / "bb.json").write_text(json.dumps({"owner_pid": int(dead.stdout)}))
    namespaces = ["sl-aa-n0", "sl-aa-sw", "sl-bb-n0", "sl-cc-n0", "other-ns"]
    removed: list[str] = []

    def fake_down(run_id: str | None = None) -> list[str]:
        gone = [n for n in namespaces if n.startswith(f"sl-{run_id}-" if run_id else "sl-")]
        for n in gone:
            namespaces.remove(n)
        (tmp_path / f"{run_id}.json").unlink(missing_ok=True)
        removed.extend(gone)
        return gone

    monkeypatch.setattr(net, "list_namespaces", lambda: list(namespaces))
    monkeypatch.setattr(net, "down", fake_down)
    monkeypatch.setattr(net, "check_root", lambda: None)
    return removed


def test_runs_and_the_stale_one(host: list[str]) -> None:
    assert net.runs() == {"aa": ["sl-aa-n0", "sl-aa-sw"], "bb": ["sl-bb-n0"], "cc": ["sl-cc-n0"]}
    assert [r for r in net.runs() if net.stale(r)] == ["bb"]


def test_down_run_removes_that_run_and_the_stale_one_only(host: list[str]) -> None:
    assert sorted(net.down_run("aa")) == ["aa", "bb"]
    assert sorted(host) == ["sl-aa-n0", "sl-aa-sw", "sl-bb-n0"]  # cc, another's, untouched


def test_down_without_a_run_on_a_shared_host_names_the_runs(host: list[str],
                                                            cli_fails: Callable[..., str]) -> None:
    cli_fails(["emulate", "down"], "RUN (None) is needed", "several emulations are up (['aa', 'cc'])", "--all")
    cli_fails(["emulate", "down", "zz"], "RUN ('zz') is not an emulation on this host")
    cli_fails(["emulate", "down", "aa", "--all"], "--all (True) and RUN ('aa')")
    res = CliRunner().invoke(app, ["emulate", "down", "cc"])
    assert res.exit_code == 0 and "cc" in res.output, res.output
    assert sorted(host) == ["sl-bb-n0", "sl-cc-n0"]  # the stale one went too


def test_a_run_brought_up_for_a_command_records_its_owner_and_sweeps_stale_runs_first(
        host: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from slowlink.emulate.plan import Plan

    monkeypatch.setattr(net, "up", lambda plan: plan)
    plan = Plan("dd", ("sl-dd-n0",), (), (), ("10.0.0.1",), 1e6, 0.01, "single-switch")
    assert net.up_owned(plan).owner_pid == os.getpid()
    assert host == ["sl-bb-n0"]  # the stale run went first; aa (kept up) and cc (not ours) stayed
