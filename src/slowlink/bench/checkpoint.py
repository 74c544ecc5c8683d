"""``slowlink bench checkpoint``: N gloo ranks save a sharded model state with torch.distributed.checkpoint,
synchronously (``dcp.save``) and asynchronously (``dcp.async_save``), then load it back; each time beside the
storage model's prediction for this machine.

Every rank holds ``state_bytes`` of fp32 tensors under its own names (a sharded state, as FSDP or ZeRO give:
DCP writes each once, from its rank). Times are the slowest rank's, every phase starting at a barrier:
  sync   blocking = dcp.save until it returns (every byte written and fsync'ed); drain = 0
  async  blocking = dcp.async_save until it returns (the state staged into host memory); drain = from then until
         its future completes (written and fsync'ed). It runs on its own gloo group: on the default group, with
         training collectives beside it, it hung (FIELD_NOTES.md, "Async checkpoints with gloo").
  restore = dcp.load into a like-shaped state after the checkpoint's pages were evicted; every tensor is checked
         equal to what was saved.
The prediction (:mod:`slowlink.storage.checkpoint`), from probes of this host taken before and after the ranks
(the model takes the mean time per byte of the two), nothing fitted to the checkpoint runs:
  write    = ``dcp_write_time_s``: every rank's torch.save pass (CRC-32) over its bytes, the ranks sharing the
             cores, then ``checkpoint_write_time_s(B, 1 node, disk, disk)``
  async    blocking = ``staging_time_s(B / N, copy)``; drain = write
  restore  = ``dcp_restore_time_s``: ``checkpoint_restore_time_s`` then one host copy into the caller's tensors
where disk write and read bandwidth are measured by N threads writing (fsync) and reading back (cache evicted)
``probe_bytes`` on the same filesystem; ``copy`` is one tensor copy of a rank's bytes in host memory (the "host
link" of a CPU rank); ``serialize`` is ``torch.save`` of a like tensor into /dev/null with torch's own settings
(CRC-32 on by default), one thread; cores are the CPUs this process may run on.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from slowlink import units
from slowlink.bench import pagecache
from slowlink.bench.record import RankRows
from slowlink.errors import BenchError, SpecError, field_error
from slowlink.storage.checkpoint import (
    checkpoint_restore_time_s,
    checkpoint_write_time_s,
    dcp_restore_time_s,
    dcp_write_time_s,
    staging_time_s,
)

MODES = ("sync", "async")
TENSORS = 8  # tensors per rank: a few layers' worth, so DCP's per-item planning is exercised


@dataclass(frozen=True)
class CheckpointBenchConfig:
    """Options of one run."""

    state_bytes: int = 64 * 2**20
    """Bytes of model state on each rank."""
    modes: tuple[str, ...] = MODES
    """sync and/or async."""
    repeat: int = 3
    """Saves per mode; each row keeps the median."""
    directory: str | None = None
    """Where the checkpoints go (a temporary folder under it, removed afterwards); default the system's."""
    probe_bytes: int = 128 * 2**20
    """Bytes of the disk probe."""

    def check(self) -> None:
        if self.state_bytes < TENSORS * 4:
            raise SpecError(field_error("--state-size", self.state_bytes, f"must be >= {TENSORS * 4} bytes"))
        if self.repeat < 1:
            raise SpecError(field_error("--repeat", self.repeat, "must be >= 1"))
        if not self.modes or any(m not in MODES for m in self.modes):
            raise SpecError(field_error("--mode", ",".join(self.modes), f"must name some of {', '.join(MODES)}"))
        if self.probe_bytes < 2**20:
            raise SpecError(field_error("--probe-size", self.probe_bytes, "must be >= 1 MiB"))
        if self.directory is not None and not Path(self.directory).is_dir():
            raise SpecError(field_error("--dir", self.directory, "is not an existing directory"))


def make_state(rank: int, state_bytes: int, seed: int = 0) -> dict[str, Any]:
    """``state_bytes`` of fp32 tensors named ``rank{r}.layer{i}``, seeded by rank."""
    import torch

    g = torch.Generator().manual_seed(seed + rank)
    n = state_bytes // 4 // TENSORS
    return {f"rank{rank}.layer{i}": torch.randn(n, generator=g) for i in range(TENSORS)}


def _slowest(dt: float) -> float:
    """The largest of every rank's ``dt`` (all_reduce MAX on the default group)."""
    import torch
    import torch.distributed as dist

    t = torch.tensor([dt], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def _timed(fn: Any) -> tuple[Any, float]:
    import torch.distributed as dist

    dist.barrier()
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def _save_once(mode: str, state: dict[str, Any], path: Path, group: Any) -> tuple[float, float]:
    """(blocking, drain) seconds of one save on this rank."""
    from torch.distributed.checkpoint.state_dict_saver import async_save, save

    if mode == "sync":
        _, t = _timed(lambda: save(state, checkpoint_id=str(path)))
        return t, 0.0
    fut, blocking = _timed(lambda: async_save(state, checkpoint_id=str(path), process_group=group))
    t0 = time.perf_counter()
    (fut.result() if hasattr(fut, "result") else fut.upload_completion.result())
    return blocking, time.perf_counter() - t0


def _restore(state: dict[str, Any], path: Path, rank: int) -> float:
    """Seconds to load this rank's part back with its pages evicted; every tensor checked equal."""
    import torch
    from torch.distributed.checkpoint.state_dict_loader import load

    pagecache.evict(p for p in path.iterdir() if p.is_file())
    target = {k: torch.empty_like(v) for k, v in state.items()}
    _, t = _timed(lambda: load(target, checkpoint_id=str(path)))
    if not all(torch.equal(target[k], v) for k, v in state.items()):
        raise BenchError(f"rank {rank}: the checkpoint at {path} did not load back equal to what was saved")
    return t


def checkpoint_rank(cfg: CheckpointBenchConfig, ctx: Any) -> RankRows:
    """One rank: every mode ``repeat`` times, then a restore; the slowest rank's median times."""
    import torch.distributed as dist

    group = dist.new_group(backend="gloo")
    state = make_state(ctx.rank, cfg.state_bytes)
    root = Path(cfg.directory or tempfile.gettempdir())
    base = Path(tempfile.mkdtemp(prefix="slowlink-ckpt-", dir=root)) if ctx.rank == 0 else None
    shared = [str(base) if base else None]
    dist.broadcast_object_list(shared, src=0)
    where = Path(str(shared[0]))
    rows = []
    try:
        for mode in cfg.modes:
            times = []
            for k in range(cfg.repeat):
                b, d = _save_once(mode, state, where / f"{mode}-{k}", group)
                times.append((_slowest(b), _slowest(d)))
            blocking, drain = sorted(times, key=lambda t: t[0] + t[1])[len(times) // 2]
            restore = _slowest(_restore(state, where / f"{mode}-0", ctx.rank))
            rows.append({"mode": mode, "ranks": ctx.world, "blocking_s": blocking, "drain_s": drain,
                         "restore_s": restore})
        dist.barrier()
    finally:
        if base is not None:
            shutil.rmtree(base, ignore_errors=True)
    return RankRows(rows, [os.uname().nodename])


@dataclass(frozen=True)
class HostProbe:
    """This machine as the checkpoint model sees it: disk write and read bandwidth, host memory copy, one
    thread's torch.save pass, and the cores the ranks share."""

    write_bytes_s: float
    read_bytes_s: float
    copy_bytes_s: float
    serialize_bytes_s: float
    cores: int

    HOW = ("write: N threads write probe_bytes / N each and fsync; read: the same files read back with their "
           "pages evicted; copy: one tensor of a rank's bytes cloned in host memory; serialize: torch.save of that "
           "tensor into /dev/null (torch's CRC-32 setting), one thread; before and after the run, mean time per byte")

    def to_json(self) -> dict[str, object]:
        return {"write_mbyte_s": self.write_bytes_s / units.MB, "read_mbyte_s": self.read_bytes_s / units.MB,
                "copy_gbyte_s": self.copy_bytes_s / units.GB, "serialize_gbyte_s": self.serialize_bytes_s / units.GB,
                "cores": self.cores, "how": self.HOW}


def _write_file(path: Path, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def probe_host(directory: Path, writers: int, probe_bytes: int, rank_bytes: int) -> HostProbe:
    """Measure disk write and read bandwidth (``writers`` threads) and one rank's host memory copy."""
    import torch

    per = probe_bytes // writers
    blobs = [np.random.default_rng(i).bytes(per) for i in range(writers)]
    tmp = Path(tempfile.mkdtemp(prefix=".slowlink-probe-", dir=directory))
    try:
        paths = [tmp / f"w{i}" for i in range(writers)]
        with ThreadPoolExecutor(writers) as pool:
            t0 = time.perf_counter()
            list(pool.map(_write_file, paths, blobs))
            write_s = time.perf_counter() - t0
            pagecache.evict(paths)
            t0 = time.perf_counter()
            list(pool.map(Path.read_bytes, paths))
            read_s = time.perf_counter() - t0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    src = torch.empty(max(1, rank_bytes // 4))
    src.fill_(1.0)
    src.clone()  # first touch of the allocator
    t0 = time.perf_counter()
    src.clone()
    copy_s = time.perf_counter() - t0
    with open(os.devnull, "wb") as sink:
        t0 = time.perf_counter()
        torch.save(src, sink)
        serialize_s = time.perf_counter() - t0
    nbytes = src.numel() * 4
    return HostProbe(per * writers / write_s, per * writers / read_s, nbytes / copy_s, nbytes / serialize_s,
                     len(os.sched_getaffinity(0)))


def mean_probe(a: HostProbe, b: HostProbe) -> HostProbe:
    """The probe before and the probe after a run, averaged as times per byte (a disk that changed its pace
    during the run is priced at its mean pace)."""
    def mean(x: float, y: float) -> float:
        return 2.0 / (1.0 / x + 1.0 / y)

    return HostProbe(mean(a.write_bytes_s, b.write_bytes_s), mean(a.read_bytes_s, b.read_bytes_s),
                     mean(a.copy_bytes_s, b.copy_bytes_s), mean(a.serialize_bytes_s, b.serialize_bytes_s),
                     min(a.cores, b.cores))


def predict(row: dict[str, Any], total_bytes: float, ranks: int, probe: HostProbe) -> dict[str, float]:
    """The model's blocking, drain and restore seconds for one row (module docstring)."""
    write = dcp_write_time_s(total_bytes, ranks, probe.cores, probe.serialize_bytes_s,
                             checkpoint_write_time_s(total_bytes, 1, probe.write_bytes_s, probe.write_bytes_s))
    restore = dcp_restore_time_s(total_bytes, ranks, probe.cores, probe.copy_bytes_s,
                                 checkpoint_restore_time_s(total_bytes, 1, probe.read_bytes_s, probe.read_bytes_s))
    if row["mode"] == "sync":
        return {"predicted_blocking_s": write, "predicted_drain_s": 0.0, "predicted_restore_s": restore}
    return {"predicted_blocking_s": staging_time_s(total_bytes / ranks, probe.copy_bytes_s),
            "predicted_drain_s": write, "predicted_restore_s": restore}


def finish_rows(rows: list[dict[str, Any]], cfg: CheckpointBenchConfig, probe: HostProbe) -> list[dict[str, Any]]:
    """Each row with its bytes, GB/s and the prediction beside it."""
    out = []
    for r in rows:
        total = cfg.state_bytes * r["ranks"]
        pred = predict(r, total, r["ranks"], probe)
        write_s = r["blocking_s"] + r["drain_s"]
        out.append({**r, "bytes": total, "gbyte_s": total / write_s / units.GB,
                    "restore_gbyte_s": total / r["restore_s"] / units.GB, **pred,
                    "write_error": (pred["predicted_blocking_s"] + pred["predicted_drain_s"]) / write_s - 1.0,
                    "restore_error": pred["predicted_restore_s"] / r["restore_s"] - 1.0})
    return out
