"""Collective sweeps over torch.distributed with nccl-tests' sizes, reductions, busbw and correctness check.

busbw = algbw * factor, the nccl-tests factors of :func:`slowlink.collectives.ops.busbw_factor`.
Every size runs out-of-place and (where torch allows it) in-place, like nccl-tests' two column groups.
torch is imported lazily, inside the functions, so slowlink works without it.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from slowlink import units
from slowlink.bench.record import CollectiveRow, RankRows
from slowlink.collectives.ops import busbw_factor
from slowlink.errors import BenchError

REDUCING = ("all_reduce", "reduce_scatter", "reduce")
REDOPS = ("sum", "prod", "min", "max", "avg")
DTYPES = units.DATATYPE_TORCH  # -d names (nccl-tests' and torch's) and the torch dtype attribute each maps to
NO_IN_PLACE = ("all_to_all", "send_recv")  # torch has no in-place form of these


def require_torch() -> Any:
    """Import torch or say how to install it."""
    try:
        import torch
    except ImportError:
        raise BenchError("torch is not installed: pip install 'slowlink[bench]'") from None
    return torch


def redops_for(op: str, redop: str, backend: str) -> tuple[str, ...]:
    """The reductions a run covers: nccl-tests' ``-o`` (sum|prod|min|max|avg|all); 'none' for non-reducing ops."""
    if redop != "all" and redop not in REDOPS:
        raise BenchError(f"-o/--redop ({redop!r}) must be one of {', '.join(REDOPS)}, all")
    if op not in REDUCING:
        return ("none",)
    if redop == "avg" and backend != "nccl":
        raise BenchError(f"-o/--redop (avg) needs the nccl backend; {backend} has no AVG reduction")
    if redop == "all":
        return REDOPS if backend == "nccl" else REDOPS[:-1]
    return (redop,)


@dataclass(frozen=True)
class BenchConfig:
    """One sweep: sizes in bytes (nccl-tests' -b/-e/-f), iterations, op, reduction, dtype and backend."""

    op: str
    sizes_bytes: tuple[float, ...]
    iters: int = 20
    warmup_iters: int = 5
    rounds: int = 4  # the iterations of every size are timed in this many rounds over all sizes (timed_rounds)
    check: bool = True
    backend: str = "gloo"
    redop: str = "sum"
    dtype: str = "float"
    root: int = 0
    fault: str | None = None  # test hook: 'corrupt' one element on fault_rank, or 'wrong_redop' (MAX for all)
    fault_rank: int = 0
    die_rank: int | None = None  # test hook: this rank fails after the first size, as die_how says
    die_how: str = "exit"  # 'exit' (code 3), 'kill' (SIGKILL, as the OOM killer does), 'hang' (stops answering)
    # or 'stop' (SIGSTOP: the process and its watchdog frozen)
    test_delay_rank: int | None = None  # test hook: this rank sleeps test_delay_s before every timed call
    test_delay_s: float = 0.0  # (a straggler's extra work between collectives; SLOWLINK_BENCH_TEST_DELAY)


@dataclass
class _Bufs:
    src: Any          # deterministic input of this rank
    out: Any          # out-of-place output
    inplace: Any      # in-place buffer (None where torch has no in-place form)
    in_view: Any      # the in-place input view (all_gather: a slice of the output)
    out_view: Any     # the in-place output view (reduce_scatter: a slice of the input)


def _data(torch: Any, dtype: Any, redop: str, per: int, r: int, device: str) -> Any:
    """Small integers, exact in every dtype; prod uses 1 and 2 only so that products stay exact."""
    idx = torch.arange(per, device=device)
    base = (idx + r) % 2 + 1 if redop == "prod" else (idx + r) % 3 + 1 + r
    return base.to(dtype)


def _torch_op(dist: Any, redop: str) -> Any:
    return {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
            "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG, "none": dist.ReduceOp.SUM}[redop]


def _buffers(torch: Any, cfg: BenchConfig, redop: str, count: int, rank: int, n: int, device: str) -> _Bufs:
    dt = getattr(torch, DTYPES[cfg.dtype])
    per = count // n
    src_count = per if cfg.op == "all_gather" else count
    src = _data(torch, dt, redop, src_count, rank, device)
    out = torch.empty(per if cfg.op == "reduce_scatter" else count, dtype=dt, device=device)
    inplace = in_view = out_view = None
    if cfg.op not in NO_IN_PLACE:
        inplace = torch.empty(count, dtype=dt, device=device)
        in_view, out_view = inplace, inplace
        if cfg.op == "all_gather":
            in_view = inplace.narrow(0, rank * per, per)
        elif cfg.op == "reduce_scatter":
            out_view = inplace.narrow(0, rank * per, per)
    return _Bufs(src, out, inplace, in_view, out_view)


def _run(dist: Any, cfg: BenchConfig, op_: Any, b: _Bufs, in_place: bool, rank: int, n: int) -> None:
    """One collective; torch's all_reduce/broadcast/reduce are in-place, so out-of-place copies first."""
    op, root = cfg.op, cfg.root
    if in_place:
        if op == "all_reduce":
            dist.all_reduce(b.inplace, op=op_)
        elif op == "all_gather":
            dist.all_gather_single(b.inplace, b.in_view)
        elif op == "reduce_scatter":
            dist.reduce_scatter_single(b.out_view, b.inplace, op=op_)
        elif op == "broadcast":
            dist.broadcast(b.inplace, src=root)
        elif op == "reduce":
            dist.reduce(b.inplace, dst=root, op=op_)
        return
    if op == "all_reduce":
        b.out.copy_(b.src)
        dist.all_reduce(b.out, op=op_)
    elif op == "all_gather":
        dist.all_gather_single(b.out, b.src)
    elif op == "reduce_scatter":
        dist.reduce_scatter_single(b.out, b.src, op=op_)
    elif op == "all_to_all":
        dist.all_to_all_single(b.out, b.src)
    elif op == "broadcast":
        b.out.copy_(b.src)
        dist.broadcast(b.out, src=root)
    elif op == "reduce":
        b.out.copy_(b.src)
        dist.reduce(b.out, dst=root, op=op_)
    else:
        reqs = [dist.isend(b.src, (rank + 1) % n), dist.irecv(b.out, (rank - 1) % n)]
        for r in reqs:
            r.wait()


def _reset_in_place(b: _Bufs) -> None:
    """Put this rank's input where the in-place collective reads it."""
    b.in_view.copy_(b.src)


def expected(torch: Any, cfg: BenchConfig, redop: str, count: int, rank: int, n: int, device: str) -> Any:
    """What ``rank`` must hold after the collective, computed locally from every rank's input."""
    dt = getattr(torch, DTYPES[cfg.dtype])
    per = count // n

    def data(r: int, k: int) -> Any:
        return _data(torch, dt, redop, k, r, device)

    def reduce(k: int) -> Any:
        stack = torch.stack([data(r, k) for r in range(n)])
        if redop in ("sum", "none"):
            return stack.sum(0).to(dt)
        if redop == "avg":
            return (stack.double().sum(0) / n).to(dt)
        if redop == "prod":
            return stack.prod(0).to(dt)
        return (stack.min(0) if redop == "min" else stack.max(0)).values

    op = cfg.op
    if op in ("all_reduce", "reduce"):
        return reduce(count)
    if op == "all_gather":
        return torch.cat([data(r, per) for r in range(n)])
    if op == "reduce_scatter":
        return reduce(count).view(n, -1)[rank]
    if op == "all_to_all":
        return torch.cat([data(r, count).view(n, -1)[rank] for r in range(n)])
    if op == "broadcast":
        return data(cfg.root, count)
    return data((rank - 1) % n, count)


def count_wrong(torch: Any, got: Any, want: Any) -> int:
    """Elements outside nccl-tests-like tolerance: exact for integers, relative 1e-2 for 16-bit floats."""
    if not got.is_floating_point():
        return int((got != want).sum())
    rtol = 1e-2 if got.element_size() == 2 else 1e-5
    return int((~torch.isclose(got.double(), want.double(), rtol=rtol, atol=0.0)).sum())


def _sync(torch: Any, backend: str) -> None:
    if backend == "nccl":
        torch.cuda.synchronize()


def _block_s(torch: Any, dist: Any, cfg: BenchConfig, op_: Any, b: _Bufs, in_place: bool, rank: int, n: int,
             k: int) -> tuple[float, float]:
    """Seconds of ``k`` back-to-back iterations on this rank, all ranks starting together (a barrier), and the
    seconds of them spent inside the collective calls (this rank's waiting plus its share of the transfer).

    On gloo a call returns when the collective is done on this rank, so the time inside it is what the rank
    waited for the others and moved data; the rest of the block is this rank's own work between calls (here
    only the test hook's delay and the loop). nccl calls only enqueue work: their inside time is not kept.
    """
    delay = cfg.test_delay_s if cfg.test_delay_rank == rank else 0.0
    inside = 0.0
    _sync(torch, cfg.backend)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(k):
        if delay:
            time.sleep(delay)
        t1 = time.perf_counter()
        _run(dist, cfg, op_, b, in_place, rank, n)
        inside += time.perf_counter() - t1
    _sync(torch, cfg.backend)
    return time.perf_counter() - t0, inside


def halves_for(op: str) -> tuple[bool, ...]:
    """The halves of a row, as in_place flags: out-of-place, and in-place where torch has one."""
    return (False,) if op in NO_IN_PLACE else (False, True)


def rounds_for(cfg: BenchConfig) -> int:
    """Rounds actually run: at least one timed iteration per block."""
    return max(1, min(cfg.rounds, cfg.iters))


@dataclass(frozen=True)
class Timings:
    """Mean seconds per iteration of every (size, half): the maximum over ranks (the row's ``time_s``), and each
    rank's own (``rank_time_s``) and the part of it inside the collective calls (``rank_wait_s``, gloo only)."""

    time_s: list[float]
    rank_time_s: list[list[float]]  # [key][rank]
    rank_wait_s: list[list[float]] | None


def timed_rounds(torch: Any, dist: Any, cfg: BenchConfig, op_: Any, bufs: list[_Bufs], halves: tuple[bool, ...],
                 rank: int, n: int, tick: Callable[[], None]) -> Timings:
    """Time every (size, half), in that order (:class:`Timings`).

    After ``warmup_iters`` per size, the ``iters`` timed iterations of each size are split into
    :func:`rounds_for` blocks, and every round visits all sizes (upwards, then downwards the next round).
    A slow spell of a shared machine (CPU steal, a noisy neighbour, another job's traffic) then lands on
    every size alike instead of on whichever size happened to be running, so the sweep stays consistent
    with itself. With more than one round each block starts with one untimed iteration, because switching
    sizes cools the caches and the transport. One round is nccl-tests' own schedule. Every rank's own times
    are gathered after the last block, so the gather never runs inside a timed one.
    """
    keys = [(b, ip) for b in bufs for ip in halves]
    for b, ip in keys:
        if ip:
            _reset_in_place(b)
        for _ in range(cfg.warmup_iters):
            _run(dist, cfg, op_, b, ip, rank, n)
    rounds = rounds_for(cfg)
    spent = [0.0] * len(keys)
    inside = [0.0] * len(keys)
    order = list(range(len(keys)))
    for r in range(rounds):
        k = cfg.iters // rounds + (1 if r < cfg.iters % rounds else 0)
        for j in order if r % 2 == 0 else order[::-1]:
            b, ip = keys[j]
            if rounds > 1:
                _run(dist, cfg, op_, b, ip, rank, n)
            total, waited = _block_s(torch, dist, cfg, op_, b, ip, rank, n, k)
            spent[j] += total
            inside[j] += waited
            tick()
    own = torch.tensor(spent + inside, dtype=torch.float64, device=bufs[0].src.device)
    every = [torch.empty_like(own) for _ in range(n)]
    dist.all_gather(every, own)
    per = [[float(x) / cfg.iters for x in t.tolist()] for t in every]  # [rank][key, then key's inside]
    m = len(keys)
    return Timings([max(p[j] for p in per) for j in range(m)], [[p[j] for p in per] for j in range(m)],
                   None if cfg.backend == "nccl" else [[p[m + j] for p in per] for j in range(m)])


def _checked(torch: Any, dist: Any, cfg: BenchConfig, redop: str, b: _Bufs, in_place: bool,
             count: int, rank: int, n: int) -> int:
    """Run once more from fresh input and count wrong elements, summed over ranks."""
    op_ = _torch_op(dist, "max" if cfg.fault == "wrong_redop" else redop)
    if in_place:
        _reset_in_place(b)
    _run(dist, cfg, op_, b, in_place, rank, n)
    got = (b.out_view if in_place else b.out)
    if cfg.fault == "corrupt" and cfg.fault_rank == rank:
        got.view(-1)[0] += 1
    wrong = torch.zeros(1, dtype=torch.int64, device=b.src.device)
    if not (cfg.op == "reduce" and rank != cfg.root):
        wrong[0] = count_wrong(torch, got, expected(torch, cfg, redop, count, rank, n, str(b.src.device)))
    dist.all_reduce(wrong)
    return int(wrong[0])


def _half(t: Timings, j: int, nbytes: int, op: str, n: int, wrong: int) -> dict[str, Any]:
    """The out-of-place or in-place half of a row (key ``j`` of ``t``): time_s, algbw_gbyte_s, busbw_gbyte_s,
    wrong, and every rank's own time and time inside the collective (rank_time_s, rank_wait_s, by rank)."""
    time_s = t.time_s[j]
    algbw = nbytes / time_s
    return {"time_s": time_s, "algbw_gbyte_s": algbw / 1e9, "busbw_gbyte_s": algbw * busbw_factor(op, n) / 1e9,
            "wrong": wrong, "rank_time_s": t.rank_time_s[j],
            "rank_wait_s": None if t.rank_wait_s is None else t.rank_wait_s[j]}


def _prefix(cfg: BenchConfig, b: _Bufs, count: int, rank: int, n: int) -> _Bufs:
    """The buffers of a ``count``-element row as views of the largest row's (nccl-tests allocates once too).

    The input pattern depends on the element index only, so a prefix holds what a fresh buffer would.
    """
    per = count // n
    src = b.src.narrow(0, 0, per if cfg.op == "all_gather" else count)
    out = b.out.narrow(0, 0, per if cfg.op == "reduce_scatter" else count)
    if b.inplace is None:
        return _Bufs(src, out, None, None, None)
    inplace = b.inplace.narrow(0, 0, count)
    part = inplace.narrow(0, rank * per, per)
    return _Bufs(src, out, inplace, part if cfg.op == "all_gather" else inplace,
                 part if cfg.op == "reduce_scatter" else inplace)


def element_count(op: str, size_bytes: float, elem_bytes: int, n: int) -> int:
    """Elements of nccl-tests' ``size``, rounded down to a multiple of the ranks (>= ranks)."""
    return max(n, int(size_bytes) // elem_bytes // n * n) if op != "send_recv" \
        else max(1, int(size_bytes) // elem_bytes)


def rank_sweep(cfg: BenchConfig, rank: int, n: int, device: str = "cpu",
               on_block: Callable[[], None] | None = None) -> list[dict[str, Any]]:
    """Run the sweep on an initialised process group; every rank returns the same rows (size-major).

    ``on_block`` is called after every timed block (:func:`timed_rounds`), for a progress bar.
    """
    torch = require_torch()
    import torch.distributed as dist

    elem = getattr(torch, DTYPES[cfg.dtype]).itemsize
    counts = [element_count(cfg.op, size, elem, n) for size in cfg.sizes_bytes]
    halves = halves_for(cfg.op)
    blocks = 0

    def tick() -> None:
        nonlocal blocks
        blocks += 1
        if cfg.die_rank == rank and blocks == 1:
            _die(cfg.die_how)
        if on_block is not None:
            on_block()

    by_size: list[list[dict[str, Any]]] = [[] for _ in counts]
    for redop in redops_for(cfg.op, cfg.redop, cfg.backend):
        op_ = _torch_op(dist, "max" if cfg.fault == "wrong_redop" else redop)
        full = _buffers(torch, cfg, redop, max(counts), rank, n, device)
        bufs = [_prefix(cfg, full, c, rank, n) for c in counts]
        times = timed_rounds(torch, dist, cfg, op_, bufs, halves, rank, n, tick)
        for i, (count, b) in enumerate(zip(counts, bufs, strict=True)):
            nbytes = count * elem
            got = [_half(times, i * len(halves) + h, nbytes, cfg.op, n,
                         _checked(torch, dist, cfg, redop, b, ip, count, rank, n) if cfg.check else -1)
                   for h, ip in enumerate(halves)]
            by_size[i].append({
                "op": cfg.op, "size_bytes": nbytes, "count": count, "type": cfg.dtype, "redop": redop,
                "root": cfg.root if cfg.op in ("broadcast", "reduce") else -1, "ranks": n,
                "backend": cfg.backend, **got[0], "in_place": got[1] if len(got) > 1 else None})
        del full, bufs
    return [row for rows in by_size for row in rows]


def _die(how: str) -> None:
    """Test hook: end this rank the way real ranks end (exit, SIGKILL) or make it stop answering."""
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if how == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    if how == "hang":
        while True:
            time.sleep(3600)
    os._exit(3)


def total_wrong(rows: Sequence[CollectiveRow]) -> int:
    """#wrong over both halves of every row (-1, unchecked, counts as 0)."""
    return sum(max(0, r.wrong) + (max(0, r.in_place.wrong) if r.in_place else 0) for r in rows)


def config_dict(cfg: BenchConfig) -> dict[str, Any]:
    return asdict(cfg)


def sweep_rank(cfg: BenchConfig, ctx: Any) -> RankRows:
    """A rank's whole job (the launcher's target): the sweep, with a progress bar on rank 0's stderr."""
    import socket

    import torch.distributed as dist

    from slowlink.progress import progress

    if cfg.test_delay_rank is not None and cfg.test_delay_rank >= ctx.world:
        raise BenchError(f"test_delay_rank, SLOWLINK_BENCH_TEST_DELAY ({cfg.test_delay_rank}) must be a rank of "
                         f"the job (< {ctx.world})")
    hosts: list[str] = [""] * ctx.world
    dist.all_gather_object(hosts, socket.gethostname())
    redops = redops_for(cfg.op, cfg.redop, cfg.backend)
    total = len(cfg.sizes_bytes) * len(halves_for(cfg.op)) * rounds_for(cfg) * len(redops)
    with progress(f"{cfg.op} x {ctx.world} ranks", total, enabled=ctx.rank == 0) as steps:
        rows = rank_sweep(cfg, ctx.rank, ctx.world, ctx.device, on_block=steps.advance)
    return RankRows(rows, hosts)
