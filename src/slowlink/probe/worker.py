"""One gloo process per emulated node that times a collective twice, healthy and degraded, in one session
(`python -m slowlink.probe.worker OP SIZE ITERS OUT_PREFIX GO_FILE`).

Starting torch and gloo in every namespace costs tens of seconds on a small machine, so the ranks stay up
between the two measurements: they time ``ITERS`` iterations, write ``OUT_PREFIX.healthy.json`` (rank 0),
wait until ``GO_FILE`` exists (the caller breaks the links meanwhile; gloo's TCP connections survive a
link rebuilt for a few milliseconds, docs/emulate.md) and time ``ITERS`` more into
``OUT_PREFIX.degraded.json``. Timing follows :mod:`slowlink.emulate.collective`: each iteration starts at
one agreed instant on the shared monotonic clock and ends when the last rank does; every rank's own time
is kept too (``rank_times_s``: the per-rank record a slow node shows up in).
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import timedelta
from typing import Any

from slowlink.emulate.collective import one_iteration

WAIT_S = 300.0  # the longest a rank waits for GO_FILE before giving up


def timed(dist: Any, torch: Any, op: str, x: Any, y: Any, iters: int) -> list[float]:
    """One warm-up, then ``iters`` iterations each started at an agreed instant; this rank's times."""
    times = [one_iteration(dist, torch, op, x, y) for _ in range(iters + 1)]
    return times[1:]


def report(dist: Any, torch: Any, times: list[float], path: str) -> None:
    """Gather every rank's times; rank 0 writes the slowest rank's per iteration and each rank's."""
    mine = torch.tensor(times, dtype=torch.float64)
    every = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(every, mine)
    if dist.get_rank() == 0:
        per_rank = [t.tolist() for t in every]
        with open(path, "w") as f:
            json.dump({"times_s": [max(r[i] for r in per_rank) for i in range(len(times))],
                       "rank_times_s": per_rank}, f)


def main(argv: list[str]) -> None:
    import torch
    import torch.distributed as dist

    op, size, iters, prefix, go_file = argv[0], int(float(argv[1])), int(argv[2]), argv[3], argv[4]
    if op not in ("all_reduce", "all_to_all"):
        raise SystemExit(f"op ({op!r}) must be all_reduce or all_to_all")
    dist.init_process_group("gloo", timeout=timedelta(seconds=WAIT_S + 60))
    x = torch.ones(size // 4, dtype=torch.float32)
    y = torch.empty_like(x)
    report(dist, torch, timed(dist, torch, op, x, y, iters), f"{prefix}.healthy.json")
    end = time.monotonic() + WAIT_S
    while not os.path.exists(go_file):
        if time.monotonic() > end:
            raise SystemExit(f"{go_file} did not appear within {WAIT_S:g} s")
        time.sleep(0.05)
    report(dist, torch, timed(dist, torch, op, x, y, iters), f"{prefix}.degraded.json")
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])
