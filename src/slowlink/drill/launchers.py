"""Faults of the launcher rather than of a rank, struck by the drill while every rank waits at the fault step.

``kill-launcher``: SIGKILL of torchrun alone (not its process group). Its ranks must die with it (they ask the
kernel for that: :func:`slowlink.drill.worker.die_with_launcher`); any still alive :data:`ORPHAN_GRACE_S` later is
an orphan. A new launcher then takes the checkpoint directory's lease (:mod:`slowlink.drill.lease`) and resumes
from the newest committed checkpoint; only then are the ranks released, so an orphan that survived would reach
its next commit fenced off.

``double-launch``: a second launcher on the same checkpoint directory while the first job runs. It must be
refused (exit code :data:`slowlink.drill.lease.REFUSED_EXIT`) before it starts anything; the first job then
finishes undisturbed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slowlink.drill.lease import REFUSED_EXIT

LAUNCHER_FAULTS = ("kill-launcher", "double-launch")
ORPHAN_GRACE_S = 5.0  # a rank still alive this long after its launcher was killed is an orphan
REFUSE_WITHIN_S = 20.0  # a second launcher not refused by then is taken as accepted (and killed)


@dataclass(frozen=True)
class Refusal:
    """A second launcher turned away: its exit code and what it said."""

    exit_code: int
    message: str

    def to_json(self) -> dict[str, object]:
        return {"exit_code": self.exit_code, "message": self.message}


@dataclass(frozen=True)
class LauncherOutcome:
    """How a launcher fault went: the job's exit code, a refusal (double-launch), ranks that outlived their
    launcher (kill-launcher), and any other process the drill had to kill."""

    rc: int
    refused: Refusal | None = None
    orphans: list[int] = field(default_factory=list)
    killed: list[subprocess.Popen[bytes]] = field(default_factory=list)


def _events(out: Path) -> list[dict[str, Any]]:
    evs = []
    for p in out.glob("events-r*.jsonl"):
        evs += [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
    return evs


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # a recycled id owned by someone else: not ours
    return Path(f"/proc/{pid}/stat").exists() and " Z " not in Path(f"/proc/{pid}/stat").read_text()


def wait_paused(out: Path, nproc: int, deadline: float) -> bool:
    """Wait until every rank has logged ``paused`` (True) or the deadline passed (False)."""
    while time.time() < deadline:
        if len({e["rank"] for e in _events(out) if e["ev"] == "paused"}) >= nproc:
            return True
        time.sleep(0.05)
    return False


def log_fault(out: Path, kind: str, rank: int, step: int) -> None:
    """The fault's time, as the ranks log theirs (the drill's own events file)."""
    rec = {"ev": "fault", "t": time.time(), "rank": rank, "attempt": 0, "step": step, "kind": kind}
    with (out / "events-rdrill.jsonl").open("a") as f:
        f.write(json.dumps(rec) + "\n")


def _remaining(deadline: float) -> float:
    return max(0.1, deadline - time.time())


def strike(kind: str, out: Path, proc: subprocess.Popen[bytes], start: Callable[[bool], subprocess.Popen[bytes]],
           nproc: int, rank: int, step: int, deadline: float) -> LauncherOutcome:
    """Strike ``kind`` at the pause and see the job to its end; ``start(resume)`` starts a launcher (with
    ``resume``, the job's relaunch after its launcher was killed; else a second one like the first)."""
    if not wait_paused(out, nproc, deadline):
        with contextlib.suppress(subprocess.TimeoutExpired):
            return LauncherOutcome(proc.wait(timeout=_remaining(deadline)))
        return LauncherOutcome(-1)
    pids = sorted({e["pid"] for e in _events(out) if e["ev"] == "start"})
    log_fault(out, kind, rank, step)
    if kind == "kill-launcher":
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        end = time.time() + ORPHAN_GRACE_S
        while any(_alive(p) for p in pids) and time.time() < end:
            time.sleep(0.05)
        orphans = [p for p in pids if _alive(p)]
        again = start(True)
        (out / "go").write_text("go\n")  # only an orphan is still waiting for it: it meets the fence
        try:
            rc = again.wait(timeout=_remaining(deadline))
        except subprocess.TimeoutExpired:
            rc = -1
        return LauncherOutcome(rc, None, orphans, [again])
    second = start(False)
    try:
        code = second.wait(timeout=REFUSE_WITHIN_S)
    except subprocess.TimeoutExpired:
        code = None
    log = out / "second-launcher.log"
    said = log.read_text(errors="replace").strip() if log.exists() else ""
    refused = Refusal(code, said.splitlines()[-1] if said else "") if code == REFUSED_EXIT else None
    (out / "go").write_text("go\n")
    try:
        rc = proc.wait(timeout=_remaining(deadline))
    except subprocess.TimeoutExpired:
        rc = -1
    return LauncherOutcome(rc, refused, [], [second])


DISK_BYTES = 64 * 2**20  # the tmpfs a disk-full drill's checkpoints go to: a few of the small model's checkpoints


def mount_small_disk(where: Path) -> None:
    """A tmpfs of :data:`DISK_BYTES` at ``where`` (root): a filesystem the drill may fill without touching the
    machine's own disks."""
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "slowlink-drill", str(where)],
                   check=True, capture_output=True)


def unmount(where: Path) -> None:
    """Unmount the drill's tmpfs (lazily: a process still holding a file there does not keep it)."""
    subprocess.run(["umount", "-l", str(where)], capture_output=True)


def free_when_full(out: Path, proc: subprocess.Popen[bytes], ckpt: Path, deadline: float) -> int:
    """disk-full: once a rank logged a failed save, remove the filler (the operator freeing space) and let torchrun's
    restart resume; the job's exit code."""
    freed = False
    while time.time() < deadline:
        if proc.poll() is not None:
            return int(proc.returncode)
        if not freed and any(e["ev"] == "save_failed" for e in _events(out)):
            (ckpt / "FILLER").unlink(missing_ok=True)
            freed = True
        time.sleep(0.05)
    return -1
