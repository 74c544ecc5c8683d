"""The fault drill: its option checks, the committed-checkpoint rule (a torn checkpoint is never loaded), the
timings read from the ranks' events, and two real torchrun drills (slow): one that recovers bit-identical, one
that cannot recover and must fail with its reason, leaving no process behind."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slowlink.cli.main import app
from slowlink.drill.harness import (
    WORKER_CLOSE_TIMEOUT_S,
    AgentReplacement,
    DrillConfig,
    Launch,
    MeasuredRecovery,
    measure,
    predict,
    run_drill,
)
from slowlink.drill.worker import commit, committed
from slowlink.errors import SpecError


@pytest.mark.parametrize(("kw", "needle"), [
    ({"fault": "melt"}, "--fault ('melt') must be one of"),
    ({"fault_phase": "later"}, "--fault-phase ('later')"),
    ({"nproc": 1}, "--nproc (1) must be >= 2"),
    ({"fault_rank": 2}, "--fault-rank (2) must be a rank of the job, 0..1"),
    ({"fault_step": 8}, "--fault-step (8) must be between 1 and --steps - 1 (7)"),
    ({"fault_phase": "save", "fault_step": 5}, "--fault-step (5) must be a checkpoint step"),
    ({"max_restarts": -1}, "--max-restarts (-1) must be >= 0"),
    ({"checkpoint_every": 0}, "--checkpoint-every (0) must be >= 1"),
    ({"pg_timeout_s": 0}, "--timeout (0) must be > 0 seconds"),
])
def test_config_refuses_bad_values(kw: dict[str, object], needle: str) -> None:
    with pytest.raises(SpecError) as info:
        DrillConfig(**kw).check()  # type: ignore[arg-type]
    assert needle in str(info.value)


def test_kill_node_victims_are_the_ranks_of_one_node() -> None:
    assert DrillConfig(nproc=4, fault="kill-node", fault_rank=3).victims() == [2, 3]
    assert DrillConfig(nproc=4, fault="kill-node", fault_rank=1, ranks_per_node=4).victims() == [0, 1, 2, 3]
    assert DrillConfig(nproc=4, fault="hang", fault_rank=3).victims() == [3]


def test_only_committed_checkpoints_are_loaded(tmp_path: Path) -> None:
    assert committed(tmp_path) == []
    for step in (3, 6, 9):
        (tmp_path / f"step_{step:08d}").mkdir()
    commit(tmp_path / "step_00000003")
    commit(tmp_path / "step_00000006")  # step 9 was torn: written in part, never committed
    assert committed(tmp_path) == [(6, tmp_path / "step_00000006"), (3, tmp_path / "step_00000003")]
    assert not (tmp_path / "step_00000006" / "COMMITTED.tmp").exists()


def test_measure_reads_the_phases_from_events() -> None:
    ev = [{"ev": "fault", "t": 10.0, "attempt": 0, "rank": 1},
          {"ev": "error", "t": 10.5, "attempt": 0, "rank": 0},
          {"ev": "pg_ready", "t": 14.0, "attempt": 1, "rank": 0},
          {"ev": "pg_ready", "t": 14.5, "attempt": 1, "rank": 1},
          {"ev": "restored", "t": 15.0, "attempt": 1, "rank": 0},
          {"ev": "restored", "t": 15.5, "attempt": 1, "rank": 1},
          {"ev": "step", "t": 16.0, "attempt": 1, "rank": 0, "step": 4},
          {"ev": "step", "t": 17.5, "attempt": 1, "rank": 0, "step": 5}]
    m = measure(Launch(0, ev, Path("x"), "", 0.0), steps_at_fault=5)
    assert m == MeasuredRecovery(detect_s=0.5, restart_s=4.0, restore_s=1.0, recompute_s=2.0)
    assert measure(Launch(1, ev[:2], Path("x"), "", 0.0), 5).restart_s is None  # never restarted


@pytest.mark.parametrize(("replacement", "restart"), [
    (None, 7.0),                             # launch to group ready, as in the reference
    (AgentReplacement(12.5, 2.0), 15.5),     # the dead agent's heartbeat expiry dominates, then ranks start
    (AgentReplacement(1.0, 2.0), 9.0),       # the replacement's start-up (2 + 4 s) dominates
])
def test_predict_waits_for_a_replaced_agent(replacement: AgentReplacement | None, restart: float) -> None:
    ref = [{"ev": "start", "t": 104.0, "attempt": 0, "rank": 0},      # agent start-up + rendezvous: 4 s
           {"ev": "pg_ready", "t": 107.0, "attempt": 0, "rank": 0},  # ranks' start to group ready: 3 s
           {"ev": "commit", "t": 108.0, "attempt": 0, "rank": 0, "save_s": 0.5}]
    rec, _ = predict(DrillConfig(fault="kill-node"), Launch(0, ref, Path("x"), "", 100.0), 1, replacement)
    assert rec.detect_s == 0.0 and rec.restart_s == pytest.approx(restart) and rec.restore_s == 0.5


def test_predict_a_hang_waits_for_torchruns_close_timeout_not_shutdown_timeout() -> None:
    # torchrun stops a group with PContext.close()'s fixed 30 s, whatever --shutdown-timeout says
    ref = [{"ev": "start", "t": 104.0, "attempt": 0, "rank": 0},
           {"ev": "pg_ready", "t": 107.0, "attempt": 0, "rank": 0}]
    for shutdown in (5, 30, 60):
        cfg = DrillConfig(fault="hang", pg_timeout_s=5.0, shutdown_timeout_s=shutdown)
        rec, _ = predict(cfg, Launch(0, ref, Path("x"), "", 100.0), 1)
        assert rec.detect_s == 5.0 and rec.restart_s == pytest.approx(WORKER_CLOSE_TIMEOUT_S + 7.0)
    crash, _ = predict(DrillConfig(fault="kill-rank"), Launch(0, ref, Path("x"), "", 100.0), 1)
    assert crash.restart_s == pytest.approx(7.0)  # a dead rank needs no wait


def _ours_running(tmp_path: Path) -> list[str]:
    left = []
    for p in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            cmd = p.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(tmp_path) in cmd:
            left.append(cmd)
    return left


@pytest.mark.slow
@pytest.mark.torch
def test_a_killed_rank_recovers_bit_identical() -> None:
    pytest.importorskip("torch")
    res = CliRunner().invoke(app, ["drill", "--steps", "6", "--checkpoint-every", "2", "--fault-step", "3",
                                   "--max-restarts", "1", "--json"])
    assert res.exit_code == 0, res.output
    r = json.loads(res.output)
    assert r["ok"] and r["recovered"] and r["state_equal"], r["reason"]
    assert r["committed_steps_lost"] == 0 and r["uncommitted_steps_lost"] == 1 and r["restarts"] == 1
    assert all(r[k] is not None for k in ("restart_s", "restore_s", "recompute_s", "predicted_recovery_s"))
    assert not _ours_running(Path(tempfile.gettempdir()) / "slowlink-drill-")


@pytest.mark.slow
@pytest.mark.torch
def test_a_drill_that_cannot_recover_fails_with_its_reason(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    r = run_drill(DrillConfig(steps=4, checkpoint_every=2, fault_step=1, max_restarts=1, every_attempt=True,
                              fault="exception"), tmp_path)
    assert not r.ok and not r.recovered and not r.state_equal
    assert "did not recover" in r.reason and "2 attempt(s)" in r.reason
    assert not r.leftover_pids and not _ours_running(tmp_path)


@pytest.mark.slow
@pytest.mark.torch
@pytest.mark.parametrize(("fault", "rule"), [("corrupt-checkpoint", "SHA-256"), ("truncate-checkpoint", "truncated")])
def test_a_damaged_checkpoint_falls_back_to_the_newest_intact_one(tmp_path: Path, fault: str, rule: str) -> None:
    pytest.importorskip("torch")
    r = run_drill(DrillConfig(steps=8, checkpoint_every=2, fault_step=5, max_restarts=1, fault=fault), tmp_path)
    assert r.ok and r.recovered and r.state_equal, r.reason
    assert r.fallback is not None and (r.fallback.from_step, r.fallback.to_step) == (4, 2)
    assert rule in r.fallback.problems[0] and "__0_0.distcp" in r.fallback.problems[0]
    j = r.to_json()
    assert j["lost_committed_steps"] == 2 and j["committed_steps_lost"] == 0 and j["fallback"]["from_step"] == 4
    assert not _ours_running(tmp_path)


def test_damage_faults_need_a_checkpoint_before_them() -> None:
    with pytest.raises(SpecError, match=r"--fault-step \(3\) must be after the first checkpoint"):
        DrillConfig(fault="corrupt-checkpoint", fault_step=3, checkpoint_every=3).check()


def test_cli_a_full_disk_is_one_message_with_its_own_exit_code(full_disk: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    monkeypatch.setattr(tempfile, "tempdir", str(full_disk))
    res = CliRunner().invoke(app, ["drill", "--steps", "4", "--checkpoint-every", "2", "--fault-step", "3"])
    assert res.exit_code == 74, res.output
    assert "no space left on the device (ENOSPC)" in res.output and "Traceback" not in res.output
    assert list(full_disk.iterdir()) == []  # the work folder and torchrun's temporaries went with it


@pytest.mark.slow
@pytest.mark.torch
def test_a_second_launcher_on_the_same_directory_is_refused(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    r = run_drill(DrillConfig(steps=6, checkpoint_every=2, fault_step=3, fault="double-launch"), tmp_path)
    assert r.ok and r.state_equal and r.refused is not None, r.reason
    assert r.refused.exit_code == 75 and "one writer per directory" in r.refused.message
    assert r.run_id.startswith("drill-") and f"run {r.run_id!r}" in r.refused.message
    assert r.to_json()["refused"]["exit_code"] == 75 and r.restarts == 0
    assert not _ours_running(tmp_path)


@pytest.mark.slow
@pytest.mark.torch
def test_a_killed_launcher_takes_its_ranks_with_it_and_a_new_one_resumes(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    r = run_drill(DrillConfig(steps=6, checkpoint_every=2, fault_step=3, fault="kill-launcher"), tmp_path)
    assert r.ok and r.recovered and r.state_equal, r.reason
    assert r.orphans == [] and r.leftover_pids == [] and r.committed_steps_lost == 0 and r.restarts == 1
    assert r.measured.total_s is not None
    assert not _ours_running(tmp_path)


@pytest.mark.slow
@pytest.mark.torch
def test_a_full_disk_fails_the_save_logs_it_and_the_job_resumes_once_space_is_freed(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    import os

    if os.geteuid() != 0:
        pytest.skip("disk-full mounts a tmpfs: root only")
    r = run_drill(DrillConfig(steps=8, checkpoint_every=2, fault_step=4, fault="disk-full"), tmp_path)
    assert r.ok and r.recovered and r.state_equal and r.committed_steps_lost == 0, r.reason
    assert {s.errno_name for s in r.saves_failed} == {"ENOSPC"} and {s.step for s in r.saves_failed} == {4}
    assert r.to_json()["failed_saves"][0]["errno"] == "ENOSPC"
    assert not _ours_running(tmp_path) and "slowlink-drill" not in Path("/proc/mounts").read_text()


def test_disk_full_needs_a_checkpoint_step() -> None:
    with pytest.raises(SpecError, match=r"--fault-step \(5\) must be a checkpoint step"):
        DrillConfig(fault="disk-full", fault_step=5, checkpoint_every=2).check()


@pytest.mark.slow
@pytest.mark.torch
def test_a_killed_drill_takes_its_job_with_it_and_the_next_start_removes_its_folder(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    from slowlink.drill.harness import remove_stale_work

    pytest.importorskip("torch")
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": os.pathsep.join(sys.path)}
    cli = subprocess.Popen([sys.executable, "-m", "slowlink", "drill", "--steps", "40", "--checkpoint-every", "2"],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and not any(
            '"ev": "step"' in p.read_text() for p in tmp_path.glob("slowlink-drill-*/reference/events-r*.jsonl")):
        time.sleep(0.2)
    os.kill(cli.pid, signal.SIGKILL)
    cli.wait()
    end = time.time() + 10
    while _ours_running(tmp_path) and time.time() < end:
        time.sleep(0.2)
    assert not _ours_running(tmp_path)  # the launcher died with the drill, the ranks with the launcher
    [work] = list(tmp_path.glob("slowlink-drill-*"))
    assert remove_stale_work(tmp_path) == [work] and not work.exists()


def test_cli_a_save_the_machine_refused_exits_74_not_1(monkeypatch: pytest.MonkeyPatch) -> None:
    from slowlink.drill import harness
    from slowlink.drill.result import DrillResult, FailedSave
    from slowlink.reliability.recovery import RecoveryCost

    def failed(cfg: DrillConfig, on_step: object = None) -> DrillResult:
        return DrillResult("kill-rank", False, False, 0, 1, 2, MeasuredRecovery(), RecoveryCost(0, 1, 1, 0), 0.1,
                           "the job did not recover", [], saves_failed=(FailedSave(3, 1, "CheckpointException",
                                                                                  "ENOSPC"),))

    monkeypatch.setattr(harness, "run_drill", failed)
    res = CliRunner().invoke(app, ["drill"])
    assert res.exit_code == 74, res.output
    assert "save of step 3 failed on rank 1: ENOSPC" in res.output and "Traceback" not in res.output
