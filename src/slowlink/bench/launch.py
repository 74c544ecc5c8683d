"""Starting ranks: N local ranks through torch's own launcher (elastic_launch, what torchrun runs), or this
process as one rank of a torchrun job. Every failure becomes a :class:`BenchError` that names the rank.

A rank runs ``target(arg, ctx)`` (a ``module:function`` name, so that spawned processes can import it) on
an initialised process group. Three guards keep a run from hanging: the process group's own timeout,
a per-rank watchdog that exits after ``timeout_s``, and the launcher, which stops every rank as soon as
one fails. Ctrl-C reaches the launcher, which stops the ranks before the command returns.
"""

from __future__ import annotations

import contextlib
import datetime
import importlib
import json
import logging
import os
import signal
import socket
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slowlink.bench.collectives import require_torch
from slowlink.errors import BenchError

BACKENDS = ("auto", "gloo", "nccl")
WATCHDOG_EXIT = 124
# How often torch's elastic agent polls its workers. Each poll records ONE failure: the first dead worker in
# its list (MultiprocessContext._poll, torch.multiprocessing ProcessContext.join), so when a killed rank and
# the peer it left behind die within one interval, the peer (lower rank) is named. A rank that fails on an
# error of torch's (a RuntimeError: gloo and NCCL raise every transport failure as one, its cause only in the
# text) therefore waits PEER_LOST_GRACE_POLLS polls before it exits, and a rank that died first is seen first.
MONITOR_INTERVAL_S = 0.1
PEER_LOST_GRACE_POLLS = 5


class Interrupted(BenchError):
    """The user pressed Ctrl-C (or the job got SIGTERM); every rank was stopped."""

    exit_code = 130


@dataclass(frozen=True)
class RankContext:
    """What a rank knows about its job."""

    rank: int
    world: int
    local_rank: int
    backend: str
    device: str


def resolve_backend(backend: str) -> str:
    """auto -> nccl when torch sees a CUDA GPU, else gloo; nccl without a GPU is an error."""
    if backend not in BACKENDS:
        raise BenchError(f"--backend ({backend!r}) must be one of {', '.join(BACKENDS)}")
    torch = require_torch()
    has_gpu = bool(torch.cuda.is_available())
    if backend == "auto":
        return "nccl" if has_gpu else "gloo"
    if backend == "nccl" and not has_gpu:
        raise BenchError(f"--backend (nccl) needs a CUDA GPU, but torch {torch.__version__} sees none "
                         f"(torch.cuda.is_available() is False, CUDA build {torch.version.cuda}); "
                         "use --backend gloo on CPU")
    return backend


def under_torchrun() -> bool:
    """True inside a rank started by torchrun (or any env:// launcher)."""
    return all(k in os.environ for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))


def init_rank(backend: str, timeout_s: float, rank: int | None = None, world: int | None = None,
              addr: str | None = None, port: int | None = None) -> RankContext:
    """Join the process group at MASTER_ADDR:MASTER_PORT (or the given address) within ``timeout_s``."""
    torch = require_torch()
    import torch.distributed as dist

    env = os.environ
    rank = int(env["RANK"]) if rank is None else rank
    world = int(env["WORLD_SIZE"]) if world is None else world
    addr = env.get("MASTER_ADDR", "127.0.0.1") if addr is None else addr
    port = int(env.get("MASTER_PORT", "29500")) if port is None else port
    local = int(env.get("LOCAL_RANK", "0"))
    device = "cpu"
    if backend != "nccl" and "OMP_NUM_THREADS" not in env:
        # Local ranks share the cores: without this each one starts a full intra-op pool and the copies,
        # reductions and checks of the ranks preempt each other (torchrun sets OMP_NUM_THREADS=1 likewise).
        local_world = int(env.get("LOCAL_WORLD_SIZE", "1"))
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(1, local_world)))
    if backend == "nccl":
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    try:
        dist.init_process_group(backend, init_method=f"tcp://{addr}:{port}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=timeout_s))
    except Exception as exc:  # torch raises RuntimeError, DistNetworkError or DistStoreError here
        time.sleep(peer_lost_grace_s(exc))  # a peer that failed first is the cause: let the launcher see it first
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BenchError(f"rendezvous at tcp://{addr}:{port} (rank {rank} of {world}) could not be reached "
                         f"or timed out within --timeout ({timeout_s:g} s): {first}", rule=RENDEZVOUS) from None
    return RankContext(rank, world, local, backend, device)


def _resolve(target: str) -> Any:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _watchdog(timeout_s: float, rank: int) -> None:
    def fire() -> None:
        sys.stderr.write(f"rank {rank}: did not finish within its timeout ({timeout_s:g} s); exiting\n")
        sys.stderr.flush()
        os._exit(WATCHDOG_EXIT)

    t = threading.Timer(timeout_s, fire)
    t.daemon = True
    t.start()


def peer_lost_grace_s(exc: BaseException) -> float:
    """Seconds a rank waits before failing on ``exc``: PEER_LOST_GRACE_POLLS monitor polls for an error of
    torch's (a RuntimeError, which may be the consequence of a peer's death: let the launcher see that first),
    0 for slowlink's own errors, whose cause is this rank."""
    return PEER_LOST_GRACE_POLLS * MONITOR_INTERVAL_S if isinstance(exc, RuntimeError) else 0.0


def run_rank(target: str, arg: Any, backend: str, timeout_s: float, error_dir: str | None = None) -> Any:
    """Body of one rank: watchdog, process group, ``target(arg, ctx)``, clean teardown.

    A :class:`BenchError` in a rank is written to ``error_dir`` for the launcher, then the rank exits 2 so
    that the launcher stops the others at once.
    """
    import warnings

    import torch.distributed as dist

    warnings.filterwarnings("ignore", category=UserWarning, module="torch.distributed.fsdp")
    rank = int(os.environ.get("RANK", "0"))
    _watchdog(timeout_s, rank)
    if error_dir is not None:
        Path(error_dir, f"rank{rank}.pid").write_text(str(os.getpid()))
    try:
        ctx = init_rank(backend, timeout_s)
        result = _resolve(target)(arg, ctx)
        dist.destroy_process_group()
        return result
    except BenchError as exc:
        if error_dir is None:
            raise
        write_note(error_dir, rank, str(exc), exc.rule)
        sys.stderr.write(f"rank {rank}: {exc}\n")
        sys.stderr.flush()
        os._exit(2)
    except RuntimeError as exc:
        time.sleep(peer_lost_grace_s(exc))
        raise


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


RENDEZVOUS = "rendezvous"  # the rule of a rank's failure to join: a consequence when another rank failed first
STOPPED = "stopped"


def write_note(error_dir: str, rank: int, message: str, rule: str) -> None:
    """A rank's failure for the launcher: its message and its rule (what the launcher sorts by, never the text)."""
    Path(error_dir, f"rank{rank}.txt").write_text(json.dumps({"message": message, "rule": rule}))


def read_notes(error_dir: str) -> dict[int, tuple[str, str]]:
    """rank -> (message, rule) of every note written."""
    notes = {}
    for n in Path(error_dir).glob("rank*.txt"):
        try:
            d = json.loads(n.read_text())
            notes[int(n.stem.removeprefix("rank"))] = (str(d["message"]), str(d["rule"]))
        except (OSError, ValueError, KeyError):
            continue
    return notes


def _failure_message(exc: Any, error_dir: str, timeout_s: float) -> str:
    """The failed rank's own words, by rule: a rank the launcher found stopped, then a rank's own error (not a
    failed rendezvous, which follows from another rank's failure), then a rank killed by a signal, then the
    launcher's first failure."""
    notes = read_notes(error_dir)
    for want in (STOPPED, None):
        for r in sorted(notes):
            if notes[r][1] == want or (want is None and notes[r][1] != RENDEZVOUS):
                return notes[r][0]
    failures = sorted(exc.failures.items(), key=lambda kv: (kv[1].exitcode >= 0, kv[1].timestamp, kv[0]))
    rank, failure = failures[0] if failures else exc.get_first_failure()
    if rank in notes:
        return notes[rank][0]
    code = failure.exitcode
    if code == WATCHDOG_EXIT:
        return f"rank {rank} did not finish within its timeout ({timeout_s:g} s); the run was stopped"
    how = f"was killed by signal {-code}" if code < 0 else f"died with exit code {code}"
    return f"rank {rank} {how}; the run was stopped"


def proc_state(pid: int) -> str | None:
    """A process's state letter from /proc (R, S, T for stopped, Z, ...), None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[0]


class StoppedRankWatch(threading.Thread):
    """The launcher's eye on ranks that cannot answer for themselves: a rank stopped by a signal (SIGSTOP, a
    debugger) freezes its own watchdog, so its peers time out and are named instead, and torch's agent then
    waits its fixed 30 s for the stopped rank to obey SIGTERM. A rank found stopped (state T) when another
    rank has ended or left a note, or after ``timeout_s``, gets a note of rule ``stopped`` and SIGKILL."""

    def __init__(self, error_dir: str, timeout_s: float) -> None:
        super().__init__(daemon=True)
        self.error_dir, self.timeout_s, self.done = error_dir, timeout_s, threading.Event()

    def run(self) -> None:
        since: dict[int, float] = {}
        while not self.done.wait(MONITOR_INTERVAL_S):
            pids = {}
            for f in Path(self.error_dir).glob("rank*.pid"):
                with contextlib.suppress(OSError, ValueError):
                    pids[int(f.stem.removeprefix("rank"))] = int(f.read_text())
            states = {r: proc_state(pid) for r, pid in pids.items()}
            ended = any(s in (None, "Z", "X") for s in states.values()) or bool(read_notes(self.error_dir))
            now = time.monotonic()
            for r, s in states.items():
                if s not in ("T", "t"):
                    since.pop(r, None)
                    continue
                first = since.setdefault(r, now)
                if ended or now - first >= self.timeout_s:
                    write_note(self.error_dir, r, f"rank {r} was stopped (process {pids[r]} in state T, e.g. "
                               f"SIGSTOP) and could not answer; killed {now - first:.0f} s after it was seen stopped",
                               STOPPED)
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pids[r], signal.SIGKILL)


def launch_local(target: str, arg: Any, nproc: int, backend: str, timeout_s: float) -> Any:
    """Start ``nproc`` ranks on this host through torch's elastic launcher; rank 0's return value.

    A failed rank makes the launcher stop the others (``max_restarts=0``) and is named in the error.
    """
    require_torch()
    if nproc < 1:
        raise BenchError(f"--nproc ({nproc}) must be >= 1")
    if timeout_s <= 0:
        raise BenchError(f"--timeout ({timeout_s:g}) must be > 0 seconds")
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    for name in ("torch.distributed.elastic", "torch.multiprocessing"):  # failures are reported below
        logging.getLogger(name).setLevel(logging.CRITICAL)
    cfg = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=nproc, run_id=uuid.uuid4().hex[:8],
                       rdzv_backend="c10d", rdzv_endpoint=f"127.0.0.1:{free_port()}", max_restarts=0,
                       monitor_interval=MONITOR_INTERVAL_S, start_method="spawn",
                       rdzv_configs={"timeout": max(1, int(timeout_s))})
    with tempfile.TemporaryDirectory(prefix="slowlink-bench-") as error_dir:
        watch = StoppedRankWatch(error_dir, timeout_s)
        watch.start()
        try:
            results = elastic_launch(cfg, run_rank)(target, arg, backend, timeout_s, error_dir)
        except ChildFailedError as exc:
            raise BenchError(_failure_message(exc, error_dir, timeout_s)) from None
        except SignalException as exc:
            raise Interrupted(f"interrupted ({exc.sigval.name}): every rank was stopped") from None
        except KeyboardInterrupt:
            raise Interrupted("interrupted (SIGINT): every rank was stopped") from None
        finally:
            watch.done.set()
            watch.join()
    return results[0]


def run(target: str, arg: Any, nproc: int | None, backend: str, timeout_s: float) -> Any:
    """Local launch, or (under torchrun, with no ``--nproc``) this process as one rank; None off rank 0."""
    be = resolve_backend(backend)
    if nproc is None and under_torchrun():
        result = run_rank(target, arg, be, timeout_s)
        return result if int(os.environ["RANK"]) == 0 else None
    return launch_local(target, arg, 2 if nproc is None else nproc, be, timeout_s)
