"""The benchmark's all_to_all (receives posted first) moves what gloo's all_to_all_single moves: real gloo, loopback."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from slowlink.emulate.collective import all_to_all


def _rank(rank: int, world: int, port: int, out: Any) -> None:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    x = torch.arange(world * 3, dtype=torch.float32) + 100 * rank  # 3 elements per peer, tagged by sender
    ours, ref = torch.empty_like(x), torch.empty_like(x)
    all_to_all(dist, x, ours)
    dist.all_to_all_single(ref, x)
    out.put((rank, ours.tolist(), ref.tolist()))
    dist.destroy_process_group()


def test_all_to_all_matches_all_to_all_single() -> None:
    torch = pytest.importorskip("torch")
    mp = torch.multiprocessing.get_context("spawn")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    world, out = 3, mp.Queue()
    procs = [mp.Process(target=_rank, args=(r, world, port, out)) for r in range(world)]
    for p in procs:
        p.start()
    got = sorted(out.get(timeout=60) for _ in range(world))
    for p in procs:
        p.join(30)
    assert [p.exitcode for p in procs] == [0] * world
    for rank, ours, ref in got:
        assert ours == ref
        assert ours[3 * rank:3 * rank + 3] == [100 * rank + 3 * rank + k for k in range(3)]  # own chunk kept
        assert ours[0:3] == [100 * 0 + 3 * rank + k for k in range(3)]  # rank 0's chunk for this rank
