"""One rank of ``slowlink drill``'s training job, started by torchrun (``python -m torch.distributed.run ...
-m slowlink.drill.worker CONFIG.json``), restarted by torchrun's elastic agent after a fault.

Each attempt joins a fresh gloo process group through a per-attempt ``PrefixStore`` (re-initialising with
plain ``env://`` after a restart fails with "Gloo connectFullMesh failed": ../shared/FIELD_NOTES.md), restores
the newest *committed* checkpoint (torch.distributed.checkpoint; a directory without its ``COMMITTED`` marker,
written by rank 0 after ``dcp.save`` returned, is torn and never loaded), and trains the ``bench train`` model
to the last step. Bit-identical resumption needs every input of a step to be a function of the step alone:
data from a generator seeded by (seed, step, rank), one intra-op thread, and gradients averaged by one
all_reduce of a flat buffer in parameter order (DDP would rebuild its buckets after the first step of each
attempt, changing the reduction order across a restart). Events (start, pg_ready, restored, step, commit,
fault, error, done) go to one JSON-lines file per rank for the drill to time.
"""

from __future__ import annotations

import time

T_START = time.time()  # process start, before torch is imported: the restart's share of the recovery

import contextlib  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from slowlink.drill.lease import EPOCH_ENV, die_with_parent, holds  # noqa: E402

COMMITTED = "COMMITTED"
PARENT = os.getppid()  # the launcher, as early as this process can see it (die_with_launcher)


class Events:
    """Append-only JSON lines of one rank (written before any fault, so a SIGKILL loses none)."""

    def __init__(self, out: Path, rank: int, attempt: int) -> None:
        self.path, self.rank, self.attempt = out / f"events-r{rank}.jsonl", rank, attempt

    def log(self, ev: str, t: float | None = None, **kw: Any) -> None:
        rec = {"ev": ev, "t": time.time() if t is None else t, "rank": self.rank, "attempt": self.attempt, **kw}
        with self.path.open("a") as f:
            f.write(json.dumps(rec) + "\n")


def committed(root: Path) -> list[tuple[int, Path]]:
    """(step, directory) of every checkpoint whose COMMITTED marker exists, newest first."""
    return sorted(((int(d.name.split("_")[1]), d) for d in root.glob("step_*") if (d / COMMITTED).exists()),
                  reverse=True)


def commit(directory: Path) -> None:
    """Write the marker atomically (temporary file, fsync, rename): a checkpoint is committed or it is not."""
    tmp = directory / (COMMITTED + ".tmp")
    with tmp.open("w") as f:
        f.write("ok\n")
        f.flush()
        os.fsync(f.fileno())
    tmp.rename(directory / COMMITTED)


def newest_intact(root: Path, ev: Events, world: int) -> tuple[int, Path | None]:
    """(step, directory) of the newest committed checkpoint every rank finds intact, (0, None) if none.

    The ranks verify a checkpoint together (each every ``world``-th file of its manifest, :mod:`slowlink.bench.
    manifest`) and agree through one all_gather of what they found; a checkpoint without a manifest is not
    intact (this job always writes one before committing). Passing over a committed checkpoint is logged as
    a ``fallback`` event with its step, the step resumed from and the problems."""
    import torch.distributed as dist

    from slowlink.bench.manifest import verify

    newest = None
    for step, d in committed(root):
        v = verify(d, (ev.rank, world))
        mine = [str(p) for p in v.problems] or ([] if v.digests else [f"{d.name}: no manifest"])
        found: list[list[str]] = [[] for _ in range(world)]
        dist.all_gather_object(found, mine)
        problems = [p for r in found for p in r]
        ev.log("verified", step=step, ok=not problems, seconds=v.seconds, hashed_bytes=v.hashed_bytes)
        if not problems:
            if newest is not None:
                ev.log("fallback", step=step, from_step=newest[0], problems=newest[1])
            return step, d
        newest = newest or (step, problems)
    if newest is not None:
        ev.log("fallback", step=0, from_step=newest[0], problems=newest[1])
    return 0, None


def seal(directory: Path, ev: Events, world: int) -> float:
    """Each rank digests the files it wrote; rank 0 writes the manifest of them all, then the COMMITTED marker
    (:mod:`slowlink.bench.manifest`); the seconds this rank spent digesting."""
    import torch.distributed as dist

    from slowlink.bench.manifest import digest_file, rank_files, write_manifest

    t0 = time.time()
    mine = [digest_file(directory / n) for n in rank_files(directory, ev.rank)]
    hash_s = time.time() - t0
    every: list[Any] = [None] * world
    dist.all_gather_object(every, mine)
    if ev.rank == 0:
        write_manifest(directory, [d for r in every for d in r])
        epoch = os.environ.get(EPOCH_ENV)
        if not holds(directory.parent, None if epoch is None else int(epoch)):
            ev.log("fenced", step=int(directory.name.split("_")[1]), epoch=epoch)
            raise Fenced(f"{directory.parent}: the lease moved past epoch {epoch}: this job may not commit")
        commit(directory)
    return hash_s


class Fenced(RuntimeError):
    """This job's lease on its checkpoint directory is gone (its launcher died and another took it)."""


def die_with_launcher() -> None:
    """Die with torchrun's agent, this rank's parent (:func:`slowlink.drill.lease.die_with_parent`): torchrun
    starts ranks in sessions of their own, so a killed launcher would otherwise leave them running, re-parented
    to PID 1."""
    die_with_parent(PARENT)


def inject(cfg: dict[str, Any], ev: Events, step: int, phase: str) -> None:
    """The configured fault, on its victims, at its step and phase, on the first attempt (or every one)."""
    if cfg["fault"] == "none" or step != cfg["fault_step"] or phase != cfg["fault_phase"]:
        return
    if ev.rank not in cfg["victims"] or (ev.attempt > 0 and not cfg["every_attempt"]):
        return
    ev.log("fault", kind=cfg["fault"], step=step)
    if cfg["fault"] == "disk-full":
        fill(Path(cfg["checkpoint_dir"]))
        return  # the save that follows meets the full disk
    if cfg["fault"] in ("corrupt-checkpoint", "truncate-checkpoint"):
        damage(Path(cfg["checkpoint_dir"]), cfg["fault"])
        os.kill(os.getpid(), signal.SIGKILL)  # the crash that makes the job load the damaged checkpoint
    if cfg["fault"] in ("kill-rank", "kill-node"):
        os.kill(os.getpid(), signal.SIGKILL)
    elif cfg["fault"] == "hang":
        os.kill(os.getpid(), signal.SIGSTOP)
    else:
        raise RuntimeError(f"drill: injected exception at step {step}")


def damage(root: Path, kind: str) -> None:
    """Damage rank 0's file of the newest committed checkpoint: ``truncate-checkpoint`` cuts it to half its
    size; ``corrupt-checkpoint`` flips 8 bytes of a tensor in it (:func:`flip_tensor_bytes`)."""
    _, d = committed(root)[0]
    target = d / "__0_0.distcp"
    if kind == "truncate-checkpoint":
        os.truncate(target, target.stat().st_size // 2)
    else:
        flip_tensor_bytes(d, target.name)


def fill(root: Path) -> None:
    """Fill the filesystem of ``root`` (a small tmpfs the drill mounted for it) with ``root/FILLER`` until the
    kernel says ENOSPC, in ever smaller writes so that not a page is left."""
    fd = os.open(root / "FILLER", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for size in (2**20, 4096, 1):
            with contextlib.suppress(OSError):
                while os.write(fd, b"\0" * size):
                    pass
    finally:
        os.close(fd)


def flip_tensor_bytes(directory: Path, name: str) -> None:
    """Flip 8 bytes in the middle of the largest item DCP stored in file ``name`` (a tensor's data: a load would
    succeed with wrong values)."""
    from torch.distributed.checkpoint.filesystem import FileSystemReader

    items = [i for i in FileSystemReader(str(directory)).read_metadata().storage_data.values()
             if i.relative_path == name]
    big = max(items, key=lambda i: i.length)
    with (directory / name).open("r+b") as f:
        f.seek(big.offset + big.length // 2)
        chunk = f.read(8)
        f.seek(big.offset + big.length // 2)
        f.write(bytes(b ^ 0xFF for b in chunk))
        f.flush()
        os.fsync(f.fileno())


def pause(out: Path, ev: Events, step: int, limit_s: float) -> None:
    """Wait (at most ``limit_s``) for the drill's ``go`` file: a fault from outside the ranks (a killed node,
    a cut link) then strikes at an exact step."""
    ev.log("paused", step=step)
    end = time.time() + limit_s
    while not (out / "go").exists() and time.time() < end:
        time.sleep(0.05)


def _group(cfg: dict[str, Any], rank: int, world: int, attempt: int) -> int:
    """Join this attempt's gloo group; the attempt's number, which every rank agrees on.

    A rank's own TORCHELASTIC_RESTART_COUNT is not enough: a replacement node's agent starts at 0 while the
    survivors count 1. Every rank of every attempt adds 1 to a counter in torchrun's store, so
    ``(count - 1) // world`` numbers the attempts alike on every node (the larger of the two is used).
    """
    import torch.distributed as dist
    from torch._C._distributed_c10d import PrefixStore, TCPStore

    env = os.environ
    agent = env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
    host, port, master = env["MASTER_ADDR"], int(env["MASTER_PORT"]), rank == 0 and not agent
    if "SLOWLINK_DRILL_STORE" in env:
        # On the emulated cluster every rank joins the rendezvous store itself (hosted by node 0's agent, which
        # outlives a killed node), not the store of whichever node is rank 0 in this round: see slowlink.drill.emulated.
        addr, _, p = env["SLOWLINK_DRILL_STORE"].rpartition(":")
        host, port, master = addr, int(p), False
    base = TCPStore(host, port, world, is_master=master, timeout=datetime.timedelta(seconds=cfg["pg_timeout_s"]))
    attempt = max(attempt, cfg.get("attempt_base", 0) + (base.add("slowlink-drill/joined", 1) - 1) // world)
    dist.init_process_group("gloo", store=PrefixStore(f"attempt{attempt}", base), rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=cfg["pg_timeout_s"]))
    return attempt


def _state(model: Any, opt: Any) -> dict[str, Any]:
    from torch.distributed.checkpoint.state_dict import get_state_dict

    msd, osd = get_state_dict(model, opt)
    return {"model": msd, "optim": osd}


def average_gradients(params: list[Any], world: int) -> None:
    """One all_reduce of every gradient, flattened in parameter order, divided by the world: the same
    summation order in every attempt (module docstring)."""
    import torch
    import torch.distributed as dist

    flat = torch.cat([p.grad.reshape(-1) for p in params])
    dist.all_reduce(flat)
    flat /= world
    offset = 0
    for p in params:
        p.grad.copy_(flat[offset:offset + p.numel()].view_as(p))
        offset += p.numel()


def train(cfg: dict[str, Any], ev: Events, world: int) -> None:
    """Restore, then train to ``steps`` with a checkpoint every ``checkpoint_every`` steps."""
    import torch
    from torch.distributed.checkpoint.state_dict import set_state_dict
    from torch.distributed.checkpoint.state_dict_loader import load as dcp_load
    from torch.distributed.checkpoint.state_dict_saver import save as dcp_save

    from slowlink.bench.train import TrainConfig, build_model

    tc = TrainConfig(**cfg["model"])
    model = build_model(tc)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    root = Path(cfg["checkpoint_dir"])
    start, latest = newest_intact(root, ev, world)
    if latest is not None:
        state = _state(model, opt)
        dcp_load(state, checkpoint_id=str(latest))
        set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    ev.log("restored", step=start)
    params = list(model.parameters())
    loss_fn = torch.nn.CrossEntropyLoss()
    for step in range(start, cfg["steps"]):
        inject(cfg, ev, step, "step")
        if cfg.get("pause_step") == step and ev.attempt == 0:
            pause(Path(cfg["out"]), ev, step, 6 * cfg["pg_timeout_s"])
        gen = torch.Generator().manual_seed(cfg["seed"] * 1_000_003 + step * 1009 + ev.rank)
        tokens = torch.randint(0, tc.vocab, (tc.batch, tc.seq_len + 1), generator=gen)
        opt.zero_grad(set_to_none=False)
        loss_fn(model(tokens[:, :-1]).reshape(-1, tc.vocab), tokens[:, 1:].reshape(-1)).backward()
        average_gradients(params, world)
        opt.step()
        ev.log("step", step=step + 1)
        if (step + 1) % cfg["checkpoint_every"] == 0 and step + 1 < cfg["steps"]:
            inject(cfg, ev, step + 1, "save")
            t0 = time.time()
            directory = root / f"step_{step + 1:08d}"
            try:
                dcp_save(_state(model, opt), checkpoint_id=str(directory))
            except BaseException as exc:  # DCP's CheckpointException is a BaseException, not an Exception
                ev.log("save_failed", step=step + 1, error=type(exc).__name__, errno=_errno(exc))
                raise
            t1 = time.time()
            hash_s = seal(directory, ev, world)
            if ev.rank == 0:
                ev.log("commit", step=step + 1, save_s=t1 - t0, hash_s=hash_s, seal_s=time.time() - t1)
    if ev.rank == 0:
        save_final(model, opt, Path(cfg["out"]) / "final.pt")


def _errno(exc: BaseException) -> int | None:
    """The OS error number behind ``exc`` (ENOSPC, EACCES, ...), looked up through its causes and, for DCP's
    CheckpointException, the per-rank failures it carries; None when there is none."""
    todo: list[BaseException] = [exc]
    seen: set[int] = set()
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno is not None:
            return e.errno
        failures = getattr(e, "failures", None)  # CheckpointException: {rank: (exception, traceback)}
        if isinstance(failures, dict):
            todo += [f[0] if isinstance(f, tuple) else f for f in failures.values()]
        todo += [c for c in (e.__cause__, e.__context__) if c is not None]
    return None


def save_final(model: Any, opt: Any, path: Path) -> None:
    """Every tensor of the model and the optimizer state, by name, for the bit-for-bit comparison."""
    import torch

    final = {f"model.{k}": v for k, v in model.state_dict().items()}
    for i, state in opt.state_dict()["state"].items():
        final |= {f"optim.{i}.{k}": v for k, v in state.items()}
    torch.save(final, path)


def serve_store(host: str, port: int) -> None:
    """Host a TCP store for torchrun's c10d rendezvous on a node of its own (``--store-node``: the agents all
    join it as clients, so any job node may be killed); runs until killed."""
    from torch._C._distributed_c10d import TCPStore

    store = TCPStore(host, port, is_master=True, wait_for_workers=False)
    while store is not None:
        time.sleep(3600)


def main() -> None:
    if sys.argv[1] == "--store":
        serve_store(sys.argv[2], int(sys.argv[3]))
        return
    cfg = json.loads(Path(sys.argv[1]).read_text())
    die_with_launcher()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) + cfg.get("attempt_base", 0)
    ev = Events(Path(cfg["out"]), rank, attempt)
    ev.log("start", t=T_START, pid=os.getpid())
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    try:
        ev.attempt = _group(cfg, rank, world, attempt)
        ev.log("pg_ready", agent_store=os.environ.get("TORCHELASTIC_USE_AGENT_STORE", ""))
        train(cfg, ev, world)
        dist.destroy_process_group()
    except BaseException as exc:  # every way out but success is logged; SystemExit and signals included
        ev.log("error", error=f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}",
               errno=_errno(exc))
        raise
    ev.log("done")


if __name__ == "__main__":
    main()
