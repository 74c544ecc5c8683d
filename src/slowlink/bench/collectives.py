"""Collective benchmarks over torch.distributed, with nccl-tests' sizes, busbw and correctness check.

busbw = algbw * factor, factors from nccl-tests doc/PERFORMANCE.md: all_reduce 2(n-1)/n;
all_gather, reduce_scatter, all_to_all (n-1)/n; broadcast, reduce, send_recv 1.
torch is imported lazily, inside the functions, so slowlink works without it.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from slowlink.errors import BenchError

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce", "send_recv")


def busbw_factor(op: str, ranks: int) -> float:
    """nccl-tests' bus-bandwidth factor for ``op`` on ``ranks`` ranks (doc/PERFORMANCE.md)."""
    n = ranks
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    if op in ("broadcast", "reduce", "send_recv"):
        return 1.0
    raise BenchError(f"op ({op!r}) must be one of {', '.join(OPS)}")


def require_torch() -> Any:
    """Import torch or say how to install it."""
    try:
        import torch
    except ImportError:
        raise BenchError("torch is not installed: pip install 'slowlink[bench]'") from None
    return torch


@dataclass(frozen=True)
class BenchConfig:
    """One sweep: sizes in bytes (nccl-tests' -b/-e/-f), iterations, op, dtype and backend."""

    op: str
    sizes_bytes: tuple[float, ...]
    iters: int = 20
    warmup_iters: int = 5
    check: bool = True
    backend: str = "gloo"
    fault_rank: int | None = None  # test hook: this rank corrupts its result before the check
    die_rank: int | None = None  # test hook: this rank exits after the first size


def _run_op(dist: Any, op: str, out: Any, inp: Any, rank: int, n: int) -> None:
    if op == "all_reduce":
        out.copy_(inp)
        dist.all_reduce(out)
    elif op == "all_gather":
        dist.all_gather_into_tensor(out, inp)
    elif op == "reduce_scatter":
        dist.reduce_scatter_tensor(out, inp)
    elif op == "all_to_all":
        dist.all_to_all_single(out, inp)
    elif op == "broadcast":
        out.copy_(inp)
        dist.broadcast(out, src=0)
    elif op == "reduce":
        out.copy_(inp)
        dist.reduce(out, dst=0)
    else:
        reqs = [dist.isend(inp, (rank + 1) % n), dist.irecv(out, (rank - 1) % n)]
        for r in reqs:
            r.wait()


def _buffers(torch: Any, op: str, count: int, rank: int, n: int) -> tuple[Any, Any]:
    """Deterministic per-rank input (small integers, exact in float32) and an output buffer."""
    per = count // n if op in ("all_gather",) else count
    inp = (torch.arange(per, dtype=torch.float32) + rank) % 3 + 1 + rank
    out_count = count // n if op == "reduce_scatter" else count
    return torch.empty(out_count, dtype=torch.float32), inp


def _expected(torch: Any, op: str, count: int, rank: int, n: int) -> Any:
    def data(r: int, per: int) -> Any:
        return (torch.arange(per, dtype=torch.float32) + r) % 3 + 1 + r

    if op in ("all_reduce", "reduce"):
        return sum(data(r, count) for r in range(n))
    if op == "all_gather":
        return torch.cat([data(r, count // n) for r in range(n)])
    if op == "reduce_scatter":
        full = sum(data(r, count) for r in range(n))
        return full.view(n, -1)[rank]
    if op == "all_to_all":
        return torch.cat([data(r, count).view(n, -1)[rank] for r in range(n)])
    if op == "broadcast":
        return data(0, count)
    return data((rank - 1) % n, count)


def rank_sweep(cfg: BenchConfig, rank: int, n: int) -> list[dict[str, Any]]:
    """Run the sweep on an initialised process group; every rank returns the same rows."""
    torch = require_torch()
    import torch.distributed as dist

    rows = []
    for i, size in enumerate(cfg.sizes_bytes):
        count = max(n, int(size) // 4 // n * n)
        out, inp = _buffers(torch, cfg.op, count, rank, n)
        for _ in range(cfg.warmup_iters):
            _run_op(dist, cfg.op, out, inp, rank, n)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(cfg.iters):
            _run_op(dist, cfg.op, out, inp, rank, n)
        t = torch.tensor([(time.perf_counter() - t0) / cfg.iters], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        wrong = torch.zeros(1, dtype=torch.int64)
        if cfg.check:
            _run_op(dist, cfg.op, out, inp, rank, n)
            if cfg.fault_rank == rank:
                out[0] += 1
            if not (cfg.op == "reduce" and rank != 0):
                wrong[0] = int((out != _expected(torch, cfg.op, count, rank, n)).sum())
            dist.all_reduce(wrong)
        time_s = float(t[0])
        nbytes = count * 4
        algbw = nbytes / time_s
        rows.append({
            "op": cfg.op, "size_bytes": nbytes, "count": count, "type": "float", "redop": "sum",
            "root": 0 if cfg.op in ("broadcast", "reduce") else -1, "ranks": n, "time_s": time_s,
            "algbw_gbyte_s": algbw / 1e9, "busbw_gbyte_s": algbw * busbw_factor(cfg.op, n) / 1e9,
            "wrong": int(wrong[0]),
        })
        if cfg.die_rank == rank and i == 0:
            os._exit(3)
    return rows


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker(rank: int, n: int, port: int, cfg: BenchConfig, out_path: str, timeout_s: float) -> None:
    import datetime

    import torch.distributed as dist

    dist.init_process_group(cfg.backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=n, timeout=datetime.timedelta(seconds=timeout_s))
    rows = rank_sweep(cfg, rank, n)
    if rank == 0:
        Path(out_path).write_text(json.dumps(rows))
    dist.destroy_process_group()


def launch_local(cfg: BenchConfig, nproc: int, timeout_s: float = 120.0) -> list[dict[str, Any]]:
    """Start ``nproc`` local ranks (spawn, free port on 127.0.0.1); a dead rank ends the run, named."""
    require_torch()
    if nproc < 1:
        raise BenchError(f"nproc ({nproc}) must be >= 1")
    import tempfile

    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        out_path = str(Path(tmp) / "rows.json")
        procs = [ctx.Process(target=_worker, args=(r, nproc, port, cfg, out_path, timeout_s), daemon=True)
                 for r in range(nproc)]
        for p in procs:
            p.start()
        try:
            _watch(procs, timeout_s)
        finally:
            for p in procs:
                if p.is_alive():
                    p.kill()
                p.join(5)
        return list(json.loads(Path(out_path).read_text()))


def _watch(procs: list[Any], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while any(p.is_alive() for p in procs):
        for r, p in enumerate(procs):
            if p.exitcode not in (None, 0):
                raise BenchError(f"rank {r} died with exit code {p.exitcode}; the run was stopped")
        if time.monotonic() > deadline:
            raise BenchError(f"benchmark did not finish within its timeout ({timeout_s:g} s)")
        time.sleep(0.05)
    for r, p in enumerate(procs):
        if p.exitcode != 0:
            raise BenchError(f"rank {r} died with exit code {p.exitcode}; the run was stopped")


def config_dict(cfg: BenchConfig) -> dict[str, Any]:
    return asdict(cfg)
