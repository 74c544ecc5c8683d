"""A gloo collective timed across the node namespaces (`python -m slowlink.emulate.collective`).

Usage: ``python -m slowlink.emulate.collective OP SIZE ITERS OUT``.

Each node runs one rank (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from ``slowlink emulate run``);
rank 0 writes ``{"op", "size_bytes", "ranks", "times_s", "rank_times_s", "cpu_s"}`` as JSON to OUT.
SIZE follows nccl-tests: the buffer for all_reduce, the total per rank for all_to_all.

all_to_all is every receive posted, then every send (:func:`all_to_all`), as PyTorch runs it on NCCL
(``ncclGroupStart``, a recv and a send per peer, ``ncclGroupEnd``), not gloo's ``all_to_all_single``.
gloo's TCP pair is one socket for both directions with a rendezvous: a send waits for the peer's
receive-ready notice, and ``gloo::alltoall`` posts the send to rank+i before the receive from rank-i
(gloo/alltoall.cc; gloo/transport/tcp/pair.cc ``Pair::send``/``Pair::recv``). A rank that starts a
fraction of a millisecond late finds its peer's notice already there, writes the whole chunk, and only
then its own notice, which the peer reads after that chunk: the pair runs one direction after the other.
Measured on the 2:1 two-leaf tree (6 MiB, 9 iterations, docs/emulate.md): median 0.59-0.70 s with
``all_to_all_single`` against 0.56-0.57 s with receives posted first, fluid bound 0.526 s. NCCL has no
such coupling (a connection per direction), so the fabric is measured with receives posted first.

Every rank shares the host's monotonic clock (namespaces do not isolate time), so each iteration starts
at one agreed instant: the ranks take the maximum of ``now + START_MARGIN_S`` and sleep until it, which
hides the skew of a barrier's exit. An iteration's time is the last rank's end minus that instant: a rank
whose sends still sit in its socket buffers finishes early, so one rank's clock under-reports.
``cpu_share`` is each rank's process CPU time over the timed iterations / their wall time, and
``cpu_busy`` the whole machine's CPU use meanwhile (``/proc/stat`` is not per namespace), to tell a CPU
limit from a link one.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import timedelta
from typing import Any

START_MARGIN_S = 0.05


def cpu_ticks() -> tuple[int, int]:
    """(total, idle) jiffies of the machine, from the first line of ``/proc/stat``."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    return sum(fields), fields[3] + fields[4]


def one_iteration(dist: Any, torch: Any, op: str, x: Any, y: Any) -> float:
    """Start ``op`` at the ranks' agreed instant (module docstring) and return this rank's time from it."""
    go = torch.tensor([time.monotonic() + START_MARGIN_S], dtype=torch.float64)
    dist.all_reduce(go, op=dist.ReduceOp.MAX)
    t0 = float(go.item())
    while (wait := t0 - time.monotonic()) > 0:
        time.sleep(wait)
    if op == "all_reduce":
        dist.all_reduce(x)
    else:
        all_to_all(dist, x, y)
    return time.monotonic() - t0


def all_to_all(dist: Any, x: Any, y: Any) -> None:
    """``y[j-th chunk] = x[this rank's chunk]`` of rank j, for every j: receives posted first (module docstring)."""
    n, me = dist.get_world_size(), dist.get_rank()
    c = x.numel() // n
    peers = [(me + i) % n for i in range(1, n)]
    reqs = [dist.irecv(y[p * c:(p + 1) * c], p) for p in peers]
    reqs += [dist.isend(x[p * c:(p + 1) * c], p) for p in peers]
    y[me * c:(me + 1) * c] = x[me * c:(me + 1) * c]
    for r in reqs:
        r.wait()


def main(argv: list[str]) -> None:
    import torch
    import torch.distributed as dist

    op, size, iters, out = argv[0], int(float(argv[1])), int(argv[2]), argv[3]
    if op not in ("all_reduce", "all_to_all"):
        raise SystemExit(f"op ({op!r}) must be all_reduce or all_to_all")
    dist.init_process_group("gloo", timeout=timedelta(seconds=120))
    world = dist.get_world_size()
    x = torch.ones(size // 4, dtype=torch.float32)
    if op == "all_to_all" and x.numel() % world:
        raise SystemExit(f"size ({size} B) must split into {world} equal float32 chunks for all_to_all")
    y = torch.empty_like(x)
    times: list[float] = []
    cpu0, ticks0, wall0 = 0.0, (0, 0), 0.0
    for i in range(iters + 1):  # the first iteration is a warm-up (connections, allocation)
        if i == 1:
            cpu0, ticks0, wall0 = time.process_time(), cpu_ticks(), time.monotonic()
        times.append(one_iteration(dist, torch, op, x, y))
    cpu = (time.process_time() - cpu0) / max(1e-9, time.monotonic() - wall0)
    total, idle = (b - a for a, b in zip(ticks0, cpu_ticks(), strict=True))
    mine = torch.tensor([*times[1:], cpu], dtype=torch.float64)
    every = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(every, mine)
    if dist.get_rank() == 0:
        per_rank = [t.tolist() for t in every]
        slowest = [max(r[i] for r in per_rank) for i in range(iters)]
        with open(out, "w") as f:
            json.dump({"op": op, "size_bytes": size, "ranks": world, "times_s": slowest,
                       "rank_times_s": [r[:-1] for r in per_rank], "cpu_share": [r[-1] for r in per_rank],
                       "cpu_busy": 1 - idle / max(1, total)}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])
