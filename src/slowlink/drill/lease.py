"""One writer per checkpoint directory: a launcher holds a lease on it for as long as it lives, and a writer whose
lease is gone cannot commit.

``python -m slowlink.drill.lease CKPT_DIR RUN_ID -- torchrun ARGS...`` takes an exclusive ``flock`` on
``CKPT_DIR/LOCK`` (the kernel drops it when the process dies, however it dies), bumps the lease's epoch in
``CKPT_DIR/LEASE`` (JSON: run id, epoch, pid), and execs torchrun, which keeps the lock: a second launcher on
the same directory is refused with a message naming the holder and exit code :data:`REFUSED_EXIT` (75,
``EX_TEMPFAIL`` of sysexits.h), before it starts anything. The ranks get the epoch in ``SLOWLINK_LEASE_EPOCH``;
rank 0 commits a checkpoint only while ``LEASE`` still holds that epoch (:func:`holds`): a rank of a launcher
that died and was replaced (an orphan) is fenced off. The check and the commit's rename are two steps, so a
fence here narrows the window to the commit itself; storage that checks the token on every write closes it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from slowlink.errors import BenchError

LOCK = "LOCK"
LEASE = "LEASE"
REFUSED_EXIT = 75
EPOCH_ENV = "SLOWLINK_LEASE_EPOCH"
RUN_ENV = "SLOWLINK_RUN_ID"
DIE_WITH_PARENT_ENV = "SLOWLINK_DIE_WITH_PARENT"


@dataclass(frozen=True)
class Lease:
    """Who holds a checkpoint directory: the run, the epoch (one more per launcher that took it), the pid."""

    run_id: str
    epoch: int
    pid: int


def read_lease(ckpt: Path) -> Lease | None:
    """The lease written in ``ckpt``, or None when there is none (or it cannot be read)."""
    try:
        d = json.loads((ckpt / LEASE).read_text())
        return Lease(str(d["run_id"]), int(d["epoch"]), int(d["pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


class LeaseTaken(BenchError):
    """Another launcher holds the checkpoint directory."""

    rule = "one_writer"


def lock(ckpt: Path) -> int:
    """Take ``ckpt``'s lock: its fd (keep it open: the lock lasts as long as the open file); :class:`LeaseTaken`,
    naming the holder, when another launcher has it."""
    ckpt.mkdir(parents=True, exist_ok=True)
    fd = os.open(ckpt / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        held = read_lease(ckpt)
        who = f"run {held.run_id!r} (launcher pid {held.pid}, epoch {held.epoch})" if held else "another launcher"
        raise LeaseTaken(f"checkpoint directory ({str(ckpt)!r}) is held by {who}: one writer per directory; "
                         "stop that job or give this one another directory") from None
    return fd


def write_lease(ckpt: Path, run_id: str) -> Lease:
    """Under the lock: the next epoch's lease for ``run_id``, written atomically (fencing the previous epoch)."""
    old = read_lease(ckpt)
    lease = Lease(run_id, (old.epoch if old else 0) + 1, os.getpid())
    tmp = ckpt / f"{LEASE}.tmp"
    tmp.write_text(json.dumps({"run_id": lease.run_id, "epoch": lease.epoch, "pid": lease.pid}))
    with open(tmp, "rb+") as fh:
        os.fsync(fh.fileno())
    tmp.rename(ckpt / LEASE)
    return lease


def acquire(ckpt: Path, run_id: str) -> tuple[int, Lease]:
    """Lock ``ckpt`` and write a new lease: the lock's fd (keep it open) and the lease; :class:`LeaseTaken` when
    another launcher holds it."""
    fd = lock(ckpt)
    return fd, write_lease(ckpt, run_id)


def holds(ckpt: Path, epoch: int | None) -> bool:
    """True when the lease of ``ckpt`` is still ``epoch`` (None: the job runs without a lease)."""
    if epoch is None:
        return True
    lease = read_lease(ckpt)
    return lease is not None and lease.epoch == epoch


def die_with_parent(parent: int | None = None) -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux ``prctl(PR_SET_PDEATHSIG)``,
    <linux/prctl.h>; kept across exec): a launcher started by a drill goes with the drill, however the drill
    ends. A parent already gone (not ``parent``) ends this process at once."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    expected = os.getppid() if parent is None else parent
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    if os.getppid() != expected:
        os._exit(1)


def check_port_free(host: str, port: int) -> None:
    """:class:`LeaseTaken` when something on this host already listens on the rendezvous ``host:port`` that this
    launcher is to host: torchrun would join that job's store as a client instead of failing."""
    import errno
    import socket

    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a closed job's TIME_WAIT is no listener
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            raise LeaseTaken(f"rendezvous endpoint ({host}:{port}) is already served by another job on this host: "
                             "torchrun would silently join its store; give this job another port") from None


def main(argv: list[str]) -> None:
    """``CKPT_DIR RUN_ID [--rdzv HOST:PORT] -- COMMAND...``: take the lease (and check that the rendezvous this
    launcher hosts is free), then exec the command holding it."""
    rdzv = None
    if len(argv) > 3 and argv[2] == "--rdzv":
        rdzv, argv = argv[3], argv[:2] + argv[4:]
    ckpt, run_id, sep, *cmd = argv
    if sep != "--" or not cmd:
        sys.stderr.write("usage: python -m slowlink.drill.lease CKPT_DIR RUN_ID [--rdzv HOST:PORT] -- COMMAND...\n")
        sys.exit(2)
    try:
        fd = lock(Path(ckpt))  # the directory first, then the port: a lease is written only when both are free
        if rdzv is not None:
            host, _, port = rdzv.rpartition(":")
            check_port_free(host, int(port))
        lease = write_lease(Path(ckpt), run_id)
    except LeaseTaken as exc:
        sys.stderr.write(f"refused: {exc}\n")
        sys.exit(REFUSED_EXIT)
    os.set_inheritable(fd, True)  # exec keeps it: the lock lives exactly as long as the launcher
    if os.environ.get(DIE_WITH_PARENT_ENV):
        die_with_parent()
    os.environ[EPOCH_ENV], os.environ[RUN_ENV] = str(lease.epoch), run_id
    with contextlib.suppress(OSError):
        os.execv(cmd[0], cmd)
    sys.stderr.write(f"cannot start {cmd[0]!r}\n")
    sys.exit(127)


if __name__ == "__main__":
    main(sys.argv[1:])
