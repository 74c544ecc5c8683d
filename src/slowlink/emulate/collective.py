"""A gloo collective timed across the node namespaces (`python -m slowlink.emulate.collective`).

Usage: ``python -m slowlink.emulate.collective OP SIZE ITERS OUT``.

Each node runs one rank (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from ``slowlink emulate run``);
rank 0 writes ``{"op", "size_bytes", "times_s"}`` as JSON to OUT. SIZE follows nccl-tests: the buffer for
all_reduce, the total per rank for all_to_all.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import timedelta


def main(argv: list[str]) -> None:
    import torch
    import torch.distributed as dist

    op, size, iters, out = argv[0], int(float(argv[1])), int(argv[2]), argv[3]
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    world = dist.get_world_size()
    x = torch.ones(size // 4, dtype=torch.float32)
    y = torch.empty_like(x)
    times = []
    for _ in range(iters + 1):
        dist.barrier()
        t0 = time.perf_counter()
        if op == "all_reduce":
            dist.all_reduce(x)
        elif op == "all_to_all":
            dist.all_to_all_single(y, x)
        else:
            raise SystemExit(f"op ({op!r}) must be all_reduce or all_to_all")
        times.append(time.perf_counter() - t0)
    if dist.get_rank() == 0:
        with open(out, "w") as f:
            json.dump({"op": op, "size_bytes": size, "ranks": world, "times_s": times[1:]}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])
