"""The fault drill on the emulated cluster (root + torch, slow): a cut link and a killed node (agent and
rank, then a replacement agent) recover bit-identical and the drill's namespaces and processes are gone
afterwards; the refusals need neither."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest

from slowlink.drill.emulated import check_emulated, run_emulated_drill
from slowlink.drill.harness import DrillConfig
from slowlink.errors import SpecError

EX = Path(__file__).parents[2] / "examples"


@pytest.mark.parametrize(("kw", "needle"), [
    ({"fault": "cut-link", "fault_rank": 0}, "--fault-rank (0): node 0 hosts torchrun's rendezvous store"),
    ({"fault": "kill-node", "fault_rank": 0}, "--fault-rank (0): node 0 hosts torchrun's rendezvous store"),
    ({"fault": "cut-link", "fault_phase": "save", "fault_step": 3}, "--fault-phase ('save')"),
])
def test_emulated_refusals(kw: dict[str, object], needle: str) -> None:
    with pytest.raises(SpecError) as info:
        check_emulated(DrillConfig(**kw), 2)  # type: ignore[arg-type]
    assert needle in str(info.value)


def test_node0_may_fail_when_the_store_has_a_node_of_its_own() -> None:
    assert check_emulated(DrillConfig(fault="kill-node", fault_rank=0), 2, store_node=True).fault_rank == 0


def test_cut_link_needs_the_emulated_cluster() -> None:
    with pytest.raises(SpecError, match="needs --emulated"):
        DrillConfig(fault="cut-link").check()


@pytest.mark.slow
@pytest.mark.netns
@pytest.mark.torch
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_cut_link_recovers_and_leaves_no_namespace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from slowlink.emulate import net

    monkeypatch.setattr(net, "STATE_DIR", tmp_path / "state")
    cfg = DrillConfig(fault="cut-link", steps=6, checkpoint_every=2, fault_step=3, max_restarts=1,
                      shutdown_timeout_s=5, timeout_s=200)
    r = run_emulated_drill(cfg, EX / "emulate-flat.yaml", nodes=2, workdir=tmp_path, run_prefix="kn")
    assert r.ok, r.reason
    assert r.committed_steps_lost == 0 and r.uncommitted_steps_lost == 1
    detect = r.measured.detect_s
    assert detect is not None and detect >= cfg.pg_timeout_s * 0.9  # a cut link is silence: the timeout
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [line for line in left.splitlines() if line.startswith("sl-kn")]


def _processes_of(run_prefix: str) -> list[int]:
    """Processes started for an emulated run whose id starts with ``run_prefix`` (node_env sets it)."""
    found = []
    for env in Path("/proc").glob("[0-9]*/environ"):
        try:
            if f"SLOWLINK_EMULATE_RUN={run_prefix}".encode() in env.read_bytes():
                found.append(int(env.parent.name))
        except OSError:  # gone meanwhile, or not readable
            continue
    return found


@pytest.mark.slow
@pytest.mark.netns
@pytest.mark.torch
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
@pytest.mark.parametrize(("spare", "store_node", "victim"), [(False, False, 1), (True, False, 1), (False, True, 0)],
                         ids=["same-node", "spare-node", "node0-store-node"])
def test_kill_node_recovers_with_a_replacement_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     spare: bool, store_node: bool, victim: int) -> None:
    from slowlink.drill.emulated import KEEP_ALIVE_INTERVAL_S, KEEP_ALIVE_MAX_ATTEMPT
    from slowlink.emulate import net

    monkeypatch.setattr(net, "STATE_DIR", tmp_path / "state")
    cfg = DrillConfig(fault="kill-node", steps=6, checkpoint_every=2, fault_step=3, max_restarts=1,
                      shutdown_timeout_s=5, timeout_s=120, fault_rank=victim)
    r = run_emulated_drill(cfg, EX / "emulate-flat.yaml", nodes=2, workdir=tmp_path, run_prefix="kn",
                           spare=spare, store_node=store_node)
    assert r.ok, r.reason
    assert r.committed_steps_lost == 0 and r.uncommitted_steps_lost == 1 and r.restarts == 1
    restart = r.measured.restart_s
    # the next round waits for the killed agent's heartbeat to expire: at least (attempts - 1) intervals
    assert restart is not None and restart >= KEEP_ALIVE_INTERVAL_S * (KEEP_ALIVE_MAX_ATTEMPT - 1)
    assert r.predicted.restart_s > KEEP_ALIVE_INTERVAL_S * (KEEP_ALIVE_MAX_ATTEMPT - 0.5)
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [line for line in left.splitlines() if line.startswith("sl-kn")]
    assert not _processes_of("kn")
