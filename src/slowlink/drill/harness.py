"""``slowlink drill``: a real fault drill on this machine. A small training job (the ``bench train`` model,
gloo on CPU) runs under torchrun with elastic restarts (``--max-restarts``) and torch.distributed.checkpoint
every K steps; a fault is injected on the first attempt; the elastic agent restarts the gang, which resumes
from the newest committed checkpoint (:mod:`~slowlink.drill.worker`). The same job without the
fault is the reference: the drill passes only when the job recovered, its final model and optimizer state
are bit-identical to the reference's, and no committed step was lost.

Faults: ``kill-rank`` (SIGKILL one rank), ``kill-node`` (SIGKILL every rank of the victim's node; locally a
node is ``ranks_per_node`` consecutive ranks), ``hang`` (SIGSTOP one rank: the others wait for the process
group timeout), ``exception`` (a rank raises). ``fault_phase: save`` strikes as the checkpoint at the fault
step begins, so that checkpoint is torn and must never be loaded.

Measured, from the ranks' event times (wall clock): detect = first error seen by any rank - fault;
restart = the new attempt's process group ready - detection; restore = checkpoint loaded - group ready;
recompute = the fault step reached again - restore. Predicted, by the recovery model
(:class:`~slowlink.reliability.recovery.RecoveryCost`) fed with the reference run's own measurements:
detect = the process group timeout for a hang or a cut link, else 0 (a dead peer closes its sockets); restart = the
reference's launch-to-group-ready (plus, for a hang, :data:`WORKER_CLOSE_TIMEOUT_S`: a stopped rank ignores
the agent's SIGTERM and goes only at the SIGKILL that follows, and torchrun waits its fixed 30 s for that, not
``--shutdown-timeout``); restore = the reference's checkpoint save time plus its digest time per checkpoint
verified (two after a damaged one); recompute = the steps since the newest intact checkpoint x the reference's
step time.

Every checkpoint is sealed by a manifest of SHA-256 digests before its ``COMMITTED`` marker
(:mod:`slowlink.bench.manifest`) and verified before it is loaded; ``corrupt-checkpoint`` (8 bytes of a tensor
flipped in rank 0's file of the newest committed checkpoint) and ``truncate-checkpoint`` (that file cut in half),
each followed by a SIGKILL of the rank, must end in a ``fallback`` to the newest intact checkpoint, the steps
in between (``lost_committed_steps``) recomputed, bit-identical.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slowlink.drill.launchers import LAUNCHER_FAULTS, Refusal, free_when_full, mount_small_disk, strike, unmount
from slowlink.drill.lease import DIE_WITH_PARENT_ENV
from slowlink.drill.result import DAMAGE, DrillResult, FailedSave, Fallback, MeasuredRecovery
from slowlink.errors import BenchError, SpecError, system_refusal
from slowlink.reliability.recovery import RecoveryCost

if TYPE_CHECKING:
    from slowlink.progress import OnStep

FAULTS = ("kill-rank", "kill-node", "hang", "exception", "corrupt-checkpoint", "truncate-checkpoint",
          *LAUNCHER_FAULTS, "disk-full")
IN_RANK = tuple(f for f in FAULTS if f not in LAUNCHER_FAULTS)  # faults the ranks strike themselves
PHASES = ("step", "save")
# Seconds torchrun's agent waits between SIGTERM and SIGKILL when it stops the ranks of a failed or restarted
# group. torch 2.13: a failed rank ends the group in SubprocessContext._poll -> PContext.close() and a restart
# stops it in LocalElasticAgent._stop_workers -> _shutdown(); both take the default ``timeout: int = 30``
# (torch/distributed/elastic/multiprocessing/api.py, PContext.close; agent/server/local_elastic_agent.py,
# _shutdown). torchrun's --shutdown-timeout reaches only the agent's own exit (agent/server/api.py, run()).
WORKER_CLOSE_TIMEOUT_S = 30.0
SMALL_MODEL = {"layers": 2, "hidden": 64, "heads": 4, "ffn_hidden": 128, "vocab": 256, "seq_len": 32, "batch": 2}


@dataclass(frozen=True)
class DrillConfig:
    """The drill's job and fault; :meth:`check` names any bad value."""

    nproc: int = 2
    steps: int = 8
    checkpoint_every: int = 3
    fault: str = "kill-rank"
    fault_step: int = 5
    fault_rank: int = 1
    fault_phase: str = "step"
    ranks_per_node: int | None = None  # kill-node: ranks on one (local) node; default nproc // 2
    max_restarts: int = 2
    every_attempt: bool = False  # strike on every attempt: a job that can never recover
    pg_timeout_s: float = 10.0
    timeout_s: float = 300.0
    seed: int = 0
    shutdown_timeout_s: int = 30  # torchrun --shutdown-timeout: SIGTERM's grace when the agent itself exits
    # (a restart ignores it: WORKER_CLOSE_TIMEOUT_S)

    def check(self) -> None:
        def bad(flag: str, value: object, rule: str) -> SpecError:
            return SpecError(f"--{flag} ({value!r}) {rule}")

        if self.fault not in (*FAULTS, "cut-link"):
            raise bad("fault", self.fault, f"must be one of {', '.join(FAULTS)}, cut-link (--emulated)")
        if self.fault == "cut-link" and self.ranks_per_node != 1:
            raise bad("fault", self.fault, "needs --emulated CLUSTER.yaml: there is no link to cut between local ranks")
        if self.fault_phase not in PHASES:
            raise bad("fault-phase", self.fault_phase, f"must be one of {', '.join(PHASES)}")
        for name in ("nproc", "steps", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise bad(name.replace("_", "-"), getattr(self, name), "must be >= 1")
        if self.nproc < 2:
            raise bad("nproc", self.nproc, "must be >= 2: a fault drill needs a peer to notice the fault")
        if not 0 <= self.fault_rank < self.nproc:
            raise bad("fault-rank", self.fault_rank, f"must be a rank of the job, 0..{self.nproc - 1}")
        if not 0 < self.fault_step < self.steps:
            raise bad("fault-step", self.fault_step, f"must be between 1 and --steps - 1 ({self.steps - 1})")
        if self.fault_phase == "save" and self.fault_step % self.checkpoint_every:
            raise bad("fault-step", self.fault_step, f"must be a checkpoint step (a multiple of --checkpoint-every "
                      f"{self.checkpoint_every}) with --fault-phase save")
        if self.fault in LAUNCHER_FAULTS and self.ranks_per_node == 1:
            raise bad("fault", self.fault, "is a local drill's fault (one launcher for every rank): drop --emulated")
        if self.fault in LAUNCHER_FAULTS and self.fault_phase != "step":
            raise bad("fault-phase", self.fault_phase, f"must be step with --fault {self.fault}")
        if self.fault == "disk-full" and os.geteuid() != 0:
            raise bad("fault", self.fault, "needs root: the drill fills a tmpfs it mounts for the checkpoints")
        if self.fault == "disk-full" and self.fault_step % self.checkpoint_every:
            raise bad("fault-step", self.fault_step, f"must be a checkpoint step (a multiple of --checkpoint-every "
                      f"{self.checkpoint_every}) with --fault disk-full: the disk fills as that save begins")
        if self.fault in DAMAGE and self.fault_step <= self.checkpoint_every:
            raise bad("fault-step", self.fault_step, f"must be after the first checkpoint (--checkpoint-every "
                      f"{self.checkpoint_every}) with --fault {self.fault}: there is no checkpoint to damage before")
        if self.max_restarts < 0:
            raise bad("max-restarts", self.max_restarts, "must be >= 0")
        if self.pg_timeout_s <= 0 or self.timeout_s <= 0:
            raise bad("timeout", min(self.pg_timeout_s, self.timeout_s), "must be > 0 seconds")
        if self.shutdown_timeout_s < 0:
            raise bad("shutdown-timeout", self.shutdown_timeout_s, "must be >= 0 seconds")

    def victims(self) -> list[int]:
        if self.fault != "kill-node":
            return [self.fault_rank]
        per = self.ranks_per_node or max(1, self.nproc // 2)
        first = self.fault_rank // per * per
        return list(range(first, min(first + per, self.nproc)))


@dataclass(frozen=True)
class Launch:
    """One torchrun job: its exit code, the ranks' events, the final state file, its log and timings."""

    rc: int
    events: list[dict[str, Any]]
    final: Path
    log: str
    launched_at: float
    leftover_pids: list[int] = field(default_factory=list)
    refused: Refusal | None = None  # double-launch: the second launcher's refusal
    orphans: list[int] = field(default_factory=list)  # kill-launcher: ranks that outlived their launcher
    run_id: str = ""  # the job's run id (torchrun's --rdzv-id, the lease's holder)

    def of(self, ev: str, attempt: int | None = None) -> list[dict[str, Any]]:
        return [e for e in self.events if e["ev"] == ev and (attempt is None or e["attempt"] == attempt)]


def _torchrun(cfg: DrillConfig, port: int, config_path: Path, run_id: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(cfg.nproc),
            "--max-restarts", str(cfg.max_restarts), "--monitor-interval", "0.1",
            "--shutdown-timeout", str(cfg.shutdown_timeout_s), "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", run_id,
            "-m", "slowlink.drill.worker", str(config_path)]


def _reap(proc: subprocess.Popen[bytes], pids: list[int]) -> list[int]:
    """SIGKILL the job's own process group (torchrun was started in a new session) and any recorded rank
    still alive, by id; the ranks that had to be killed."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    left = []
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        except PermissionError:  # a recycled id owned by someone else: not ours
            continue
        left.append(pid)
        os.kill(pid, signal.SIGKILL)
    return left


def job_config(cfg: DrillConfig, out: Path, faulty: bool, in_rank_faults: tuple[str, ...] = IN_RANK) -> Path:
    """Write the ranks' configuration into a new directory ``out``; the fault only when ``faulty`` and the
    ranks strike it themselves (``in_rank_faults``); a launcher fault makes them wait at the fault step."""
    out.mkdir(parents=True)
    fault = cfg.fault if faulty and cfg.fault in in_rank_faults else "none"
    conf = {"steps": cfg.steps, "checkpoint_every": cfg.checkpoint_every, "fault": fault,
            "fault_step": cfg.fault_step, "fault_phase": cfg.fault_phase, "victims": cfg.victims(),
            "every_attempt": cfg.every_attempt, "pg_timeout_s": cfg.pg_timeout_s, "seed": cfg.seed,
            "model": SMALL_MODEL, "out": str(out), "checkpoint_dir": str(out / "ckpt")}
    if faulty and cfg.fault in LAUNCHER_FAULTS:
        conf["pause_step"] = cfg.fault_step
    if faulty and cfg.fault == "disk-full":
        conf["fault_phase"] = "save"
    path = out / "config.json"
    path.write_text(json.dumps(conf))
    return path


def _leased(ckpt: Path, run_id: str, port: int, cmd: list[str]) -> list[str]:
    """``cmd`` run holding the lease of ``ckpt``, its rendezvous port checked free (:mod:`slowlink.drill.lease`)."""
    return [sys.executable, "-m", "slowlink.drill.lease", str(ckpt), run_id, "--rdzv", f"127.0.0.1:{port}", "--",
            *cmd]


def launch(cfg: DrillConfig, work: Path, tag: str, faulty: bool) -> Launch:
    """Run the job once under torchrun (holding its checkpoint directory's lease) in ``work/tag``, strike a
    launcher fault if it is one (:mod:`slowlink.drill.launchers`), and collect what its ranks wrote."""
    from slowlink.bench.launch import free_port

    out = work / tag
    path = job_config(cfg, out, faulty)
    scratch = out / "tmp"  # torchrun's torchelastic_* and torch's own temporaries, removed with the work folder
    scratch.mkdir()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path), "TMPDIR": str(scratch),
           DIE_WITH_PARENT_ENV: "1"}  # the launcher dies with the drill, its ranks with the launcher
    port, run_id, ckpt = free_port(), f"drill-{uuid.uuid4().hex[:8]}", out / "ckpt"
    procs: list[subprocess.Popen[bytes]] = []

    def start(conf: Path, rid: str, log: Path) -> subprocess.Popen[bytes]:
        with log.open("ab") as f:
            procs.append(subprocess.Popen(_leased(ckpt, rid, port, _torchrun(cfg, port, conf, rid)), stdout=f,
                                          stderr=subprocess.STDOUT, env=env, start_new_session=True))
        return procs[-1]

    def again(resume: bool) -> subprocess.Popen[bytes]:
        if not resume:
            return start(path, f"{run_id}-second", out / "second-launcher.log")
        conf = {**json.loads(path.read_text()), "attempt_base": 1, "fault": "none", "pause_step": None}
        (out / "config-relaunch.json").write_text(json.dumps(conf))
        return start(out / "config-relaunch.json", f"{run_id}-relaunch", out / "torchrun.log")

    full = faulty and cfg.fault == "disk-full"
    if full:
        mount_small_disk(ckpt)
    t0 = time.time()
    try:
        proc = start(path, run_id, out / "torchrun.log")
        refused, orphans = None, []
        if faulty and cfg.fault in LAUNCHER_FAULTS:
            o = strike(cfg.fault, out, proc, again, cfg.nproc, cfg.fault_rank, cfg.fault_step, t0 + cfg.timeout_s)
            rc, refused, orphans = o.rc, o.refused, o.orphans
        elif full:
            rc = free_when_full(out, proc, ckpt, t0 + cfg.timeout_s)
        else:
            try:
                rc = proc.wait(timeout=cfg.timeout_s)
            except subprocess.TimeoutExpired:
                rc = -1
        events = _events(out)
        pids = sorted({e["pid"] for e in events if e["ev"] == "start"})
        left = [pid for i, p in enumerate(procs) for pid in _reap(p, [] if i else pids)]
    finally:
        if full:
            unmount(ckpt)
    text = (out / "torchrun.log").read_text(errors="replace")
    if rc == -1:
        text += f"\ndrill: the job did not finish within --timeout ({cfg.timeout_s:g} s); it was killed"
    return Launch(rc, events, out / "final.pt", text, t0, sorted(set(left) - set(orphans)), refused, orphans, run_id)


def _events(out: Path) -> list[dict[str, Any]]:
    events = []
    for p in out.glob("events-r*.jsonl"):
        events += [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
    return sorted(events, key=lambda e: e["t"])


def states_equal(a: Path, b: Path) -> bool:
    """Every tensor of two final states bit-identical (same names, dtypes, shapes and bytes)."""
    import torch

    if not (a.exists() and b.exists()):
        return False
    x, y = torch.load(a, weights_only=True), torch.load(b, weights_only=True)
    return x.keys() == y.keys() and all(torch.equal(x[k], y[k]) and x[k].dtype == y[k].dtype for k in x)


def failed_saves(run: Launch) -> tuple[FailedSave, ...]:
    """Every ``save_failed`` event of the run (:mod:`slowlink.drill.worker` logs them, DCP's
    CheckpointException included)."""
    import errno as errno_mod

    return tuple(FailedSave(int(e["step"]), int(e["rank"]), str(e["error"]),
                            errno_mod.errorcode.get(e["errno"]) if e.get("errno") is not None else None)
                 for e in run.of("save_failed"))


def fallback_of(run: Launch) -> Fallback | None:
    """The fallback rank 0 logged in the last attempt, if any (:func:`slowlink.drill.worker.newest_intact`)."""
    last = max((e["attempt"] for e in run.events), default=0)
    evs = [e for e in run.of("fallback", last) if e["rank"] == 0]
    if not evs:
        return None
    e = evs[-1]
    return Fallback(int(e["from_step"]), int(e["step"]), tuple(e["problems"]))


def _first(events: list[dict[str, Any]], t_min: float = 0.0) -> float | None:
    ts = [e["t"] for e in events if e["t"] >= t_min]
    return min(ts) if ts else None


def measure(run: Launch, steps_at_fault: int) -> MeasuredRecovery:
    """detect, restart, restore and recompute seconds from the events (module docstring)."""
    t_fault = _first(run.of("fault", 0))
    last = max((e["attempt"] for e in run.events), default=0)
    if t_fault is None or last == 0:
        return MeasuredRecovery()
    t_detect = _first(run.of("error", 0), t_fault)
    ready = max((e["t"] for e in run.of("pg_ready", last)), default=None)
    restored = max((e["t"] for e in run.of("restored", last)), default=None)
    again = _first([e for e in run.of("step", last) if e["step"] >= steps_at_fault and e["rank"] == 0])
    if t_detect is None and any(e.get("kind") == "kill-launcher" for e in run.of("fault", 0)):
        t_detect = t_fault  # the supervisor killed the launcher itself: it knows at once
    return MeasuredRecovery(
        detect_s=None if t_detect is None else t_detect - t_fault,
        restart_s=None if ready is None else ready - (t_detect if t_detect is not None else t_fault),
        restore_s=None if ready is None or restored is None else restored - ready,
        recompute_s=None if restored is None or again is None else max(0.0, again - restored))


@dataclass(frozen=True)
class AgentReplacement:
    """A killed node's torchrun agent replaced (emulated kill-node, :mod:`~slowlink.drill.emulated`):
    the next rendezvous round waits both for the dead agent to be declared dead (``dead_after_s`` after the
    fault: its heartbeat expired) and for the replacement, started ``start_after_s`` after detection, to start
    and join; only then do the ranks start."""

    dead_after_s: float
    start_after_s: float


def predict(cfg: DrillConfig, ref: Launch, uncommitted: int, replacement: AgentReplacement | None = None
            ) -> tuple[RecoveryCost, float]:
    """The recovery model on this machine: its phases from the reference run (module docstring). With a
    ``replacement`` the restart is max(dead agent expired, replacement started + the reference's agent
    start-up to its ranks' start) + the reference's rank start to group ready."""
    ready = max((e["t"] for e in ref.of("pg_ready", 0)), default=ref.launched_at)
    first = min((e["t"] for e in ref.of("start", 0)), default=ref.launched_at)
    restart = ready - ref.launched_at
    if replacement is not None:
        agent_s = replacement.start_after_s + first - ref.launched_at
        restart = max(replacement.dead_after_s, agent_s) + ready - first
    saves = [e["save_s"] for e in ref.of("commit", 0)]
    steps = sorted(e["t"] for e in ref.of("step", 0) if e["rank"] == 0)
    step_s = (steps[-1] - steps[0]) / (len(steps) - 1) if len(steps) > 1 else 0.0
    detect = cfg.pg_timeout_s if cfg.fault in ("hang", "cut-link") else 0.0  # silence waits for the timeout
    # A stopped rank ignores the agent's SIGTERM: it goes only at SIGKILL, torchrun's fixed close timeout later.
    stop = WORKER_CLOSE_TIMEOUT_S if cfg.fault == "hang" else 0.0
    hashes = [e.get("hash_s", 0.0) for e in ref.of("commit", 0)]
    verify = sorted(hashes)[len(hashes) // 2] if hashes else 0.0  # a rank's share of one checkpoint's digests
    # restore = load (as long as the save) + verifying each checkpoint tried: the damaged one, then the intact
    restore = (sorted(saves)[len(saves) // 2] if saves else 0.0) + verify * (2 if cfg.fault in DAMAGE else 1)
    rec = RecoveryCost(detect, stop + restart, restore, 0.0)
    return rec, uncommitted * step_s


def _reason(run: Launch, ref: Launch, equal: bool, committed_lost: int, fallback: Fallback | None = None,
            fault: str = "") -> str:
    if ref.rc != 0:
        return f"the reference run (no fault) failed with exit code {ref.rc}: {_tail(ref.log)}"
    if run.rc != 0:
        return (f"the job did not recover: torchrun exited {run.rc} after {_attempts(run)} attempt(s) "
                f"(--max-restarts); {_tail(run.log)}")
    if not equal:
        return "the final state differs from the uninterrupted reference run"
    if committed_lost:
        return f"{committed_lost} committed step(s) were lost: the job resumed before its last checkpoint"
    if run.orphans:
        return f"ranks {run.orphans} outlived their killed launcher (they had to be killed)"
    if fault == "double-launch" and run.refused is None:
        return "a second launcher on the same checkpoint directory was not refused"
    if run.leftover_pids or ref.leftover_pids:
        return f"ranks were left running and had to be killed: {run.leftover_pids + ref.leftover_pids}"
    if fault in DAMAGE and fallback is None:
        return "the damaged checkpoint was not noticed: no fallback was logged"
    if fallback is not None:
        where = f"step {fallback.to_step}" if fallback.to_step else "scratch (no intact checkpoint)"
        return (f"recovered: the checkpoint of step {fallback.from_step} failed verification "
                f"({'; '.join(fallback.problems[:2])}), resumed from {where}, {fallback.lost_steps} committed "
                "step(s) recomputed; bit-identical to the uninterrupted run")
    saves = failed_saves(run)
    if fault == "disk-full" and not any(s.errno_name == "ENOSPC" for s in saves):
        return "the disk filled but no failed save was logged with ENOSPC"
    if saves and fault == "disk-full":
        s = saves[0]
        return (f"recovered: the save of step {s.step} failed ({s.error}, {s.errno_name} on rank(s) "
                f"{sorted({x.rank for x in saves if x.step == s.step})}); space was freed and the job resumed from "
                "its last committed checkpoint, bit-identical to the uninterrupted run, no committed step lost")
    if fault == "kill-launcher":
        return ("recovered: the killed launcher's ranks died with it, a new launcher took the checkpoint "
                "directory's lease and resumed, bit-identical to the uninterrupted run, no committed step lost")
    if run.refused is not None:
        return (f"the second launcher was refused (exit {run.refused.exit_code}: {run.refused.message}); the job "
                "finished bit-identical to the uninterrupted run")
    return "recovered: bit-identical to the uninterrupted run, no committed step lost"


def _attempts(run: Launch) -> int:
    return 1 + max((e["attempt"] for e in run.events), default=0)


def _tail(log: str, lines: int = 3) -> str:
    keep = [ln.strip() for ln in log.splitlines() if ln.strip() and "Warning" not in ln]
    return " | ".join(keep[-lines:]) or "no output"


def run_drill(cfg: DrillConfig, workdir: Path | None = None,
              on_step: OnStep | None = None) -> DrillResult:
    """The reference run, the faulted run, and their comparison (module docstring); ``on_step`` is told as
    each run begins."""
    step = on_step or (lambda what: None)
    cfg.check()
    try:
        import torch  # noqa: F401
    except ImportError:
        raise BenchError("slowlink drill needs torch: pip install 'slowlink[bench]'") from None
    where = str(workdir or tempfile.gettempdir())
    try:
        remove_stale_work(Path(where))
        with tempfile.TemporaryDirectory(prefix="slowlink-drill-", dir=workdir) as tmp:
            work = Path(tmp)
            (work / OWNER).write_text(str(os.getpid()))
            step(f"reference run ({cfg.steps} steps)")
            ref = launch(replace(cfg, max_restarts=0), work, "reference", faulty=False)
            step(f"drill run ({cfg.fault} at step {cfg.fault_step})")
            run = launch(cfg, work, "drill", faulty=True)
            return summarize(cfg, ref, run)
    except OSError as exc:
        refused = system_refusal(exc, f"the drill's work folder under {where}")
        if refused is None:
            raise
        raise refused from None


OWNER = "owner.pid"  # in a drill's work folder: the drill's process, to tell a killed drill's folder


def remove_stale_work(where: Path) -> list[Path]:
    """Remove the work folders of drills that were killed (their owner process is gone), with what their
    launchers left in them; the folders removed."""
    import shutil

    gone = []
    for d in where.glob("slowlink-drill-*"):
        try:
            pid = int((d / OWNER).read_text())
        except (OSError, ValueError):
            continue  # not one this version marks: leave it
        try:
            os.kill(pid, 0)
            continue
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        shutil.rmtree(d, ignore_errors=True)
        gone.append(d)
    return gone


def summarize(cfg: DrillConfig, ref: Launch, run: Launch, replacement: AgentReplacement | None = None
              ) -> DrillResult:
    """Compare the faulted run with the reference: recovered, equal, steps lost, phases, prediction
    (``replacement``: :func:`predict`)."""
    faults = run.of("fault", 0)
    t_fault = _first(faults) or float("inf")
    commits0 = [e["step"] for e in run.of("commit", 0) if e["t"] <= t_fault]
    at_fault = faults[0]["step"] if faults else 0  # steps completed when the fault struck
    fb = fallback_of(run)
    destroyed = {fb.from_step} if fb is not None and cfg.fault in DAMAGE else set()
    last_commit = max((s for s in commits0 if s not in destroyed), default=0)  # the newest intact one
    restored = [e["step"] for e in run.of("restored") if e["attempt"] > 0 and e["rank"] == 0]
    committed_lost = max(0, last_commit - min(restored)) if restored else 0
    recovered = run.rc == 0 and bool(run.of("done"))
    equal = recovered and ref.rc == 0 and states_equal(ref.final, run.final)
    rec, recompute = predict(cfg, ref, at_fault - last_commit, replacement)
    uncommitted = at_fault - max(commits0, default=0)
    if cfg.fault == "double-launch":  # refused before it started anything: the job never stopped
        rec, recompute, uncommitted = RecoveryCost(0.0, 0.0, 0.0, 0.0), 0.0, 0
    return DrillResult(cfg.fault, recovered, equal, committed_lost, uncommitted, _attempts(run) - 1,
                       measure(run, at_fault), rec, recompute,
                       _reason(run, ref, equal, committed_lost, fb, cfg.fault),
                       run.leftover_pids + ref.leftover_pids, fb, run.refused, run.orphans, failed_saves(run),
                       run.run_id)
