"""A small model trained across the emulated sites by DDP or DiLoCo over gloo (`python -m
slowlink.emulate.sites_train`).

Usage: ``python -m slowlink.emulate.sites_train METHOD PARAMS STEPS WARMUP H OUT [OUTER_DTYPE]``.

Each node runs one rank (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the emulation's environment). The model
is two bias-free square linear layers of ``PARAMS`` parameters in all (fp32), trained on random inputs by SGD;
every rank starts from the same seed, so no broadcast crosses the sites. Per step:

  ddp     forward, backward, one all_reduce of the flattened gradient, the SGD step
  diloco  forward, backward, the SGD step; every H steps the pseudo-gradient (the outer parameters minus this
          rank's) is all_reduced and averaged, and the outer Nesterov step (lr 0.7, momentum 0.9: DiLoCo's,
          Douillard et al. 2023) moves the outer parameters, which every rank then takes; with OUTER_DTYPE int8
          each rank sends its pseudo-gradient as int8 with one fp32 scale (max |x| / 127) to every other, and
          averages what it receives (one byte per parameter crosses, as INTELLECT-1's int8 pseudo-gradients)

Rank 0 writes ``{"method", "outer_dtype", "params", "inner_steps", "step_s", "compute_s"}`` as JSON to OUT: the
wall time of each timed step and its compute part (all but the collective or the exchange itself: forward,
backward, the SGD step, the outer step, the int8 quantisation), after ``WARMUP`` steps.
"""

from __future__ import annotations

import json
import math
import sys
import time
from datetime import timedelta
from typing import Any

BATCH = 32
OUTER_LR, OUTER_MOMENTUM = 0.7, 0.9  # DiLoCo's outer Nesterov (Douillard et al. 2023, Sec. 3)


def mean(dist: Any, x: Any, world: int) -> tuple[Any, float]:
    """The ranks' mean of ``x`` by an all_reduce, and the seconds it took."""
    t = time.monotonic()
    dist.all_reduce(x)
    return x / world, time.monotonic() - t


def average_int8(dist: Any, torch: Any, x: Any, world: int) -> tuple[Any, float]:
    """The ranks' mean of ``x``, each sent as int8 with one fp32 scale (module docstring), and the seconds of the
    exchange (the quantisation is compute)."""
    scale = (x.abs().max() / 127.0).clamp(min=1e-12).reshape(1)
    q = (x / scale).round().clamp(-127, 127).to(torch.int8)
    packed = torch.cat([q, scale.view(torch.int8)])  # the scale's 4 bytes ride with the values: one exchange
    me = dist.get_rank()
    parts = [packed if r == me else torch.empty_like(packed) for r in range(world)]
    peers = [(me + i) % world for i in range(1, world)]
    # receives posted before sends, as emulate/collective.py's all_to_all: gloo's all_gather runs a pair's two
    # directions one after the other (its send waits for the peer's receive-ready notice), which would halve the
    # long haul's rate; the model's exchange, like NCCL's, runs both directions at once
    t = time.monotonic()
    reqs = [dist.irecv(parts[r], r) for r in peers] + [dist.isend(packed, r) for r in peers]
    for req in reqs:
        req.wait()
    wait = time.monotonic() - t
    n = q.numel()
    return sum(p[:n].float() * p[n:].view(torch.float32) for p in parts) / world, wait


def main(argv: list[str]) -> None:
    import torch
    import torch.distributed as dist

    method, params, steps, warmup, inner, out = argv[0], int(argv[1]), int(argv[2]), int(argv[3]), int(argv[4]), argv[5]
    outer_dtype = argv[6] if len(argv) > 6 else "fp32"
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    world = dist.get_world_size()
    torch.manual_seed(0)
    width = max(1, math.isqrt(params // 2))
    model = torch.nn.Sequential(torch.nn.Linear(width, width, bias=False), torch.nn.ReLU(),
                                torch.nn.Linear(width, width, bias=False))
    weights = list(model.parameters())
    opt = torch.optim.SGD(weights, lr=1e-3)
    outer = torch.cat([w.detach().flatten() for w in weights])
    momentum = torch.zeros_like(outer)
    gen = torch.Generator().manual_seed(1 + dist.get_rank())
    step_s, compute_s = [], []
    for i in range(warmup + steps):
        t0 = time.monotonic()
        x = torch.randn(BATCH, width, generator=gen)
        model(x).pow(2).mean().backward()
        if method == "ddp":
            tc = time.monotonic()
            flat = torch.cat([w.grad.flatten() for w in weights])  # type: ignore[union-attr]
            dist.all_reduce(flat)
            torch.nn.utils.vector_to_parameters(flat / world, [w.grad for w in weights])  # type: ignore[misc]
            t1 = time.monotonic()
            opt.step()
            opt.zero_grad()
            comm = t1 - tc
        else:
            opt.step()
            opt.zero_grad()
            comm = 0.0
            if (i + 1) % inner == 0:
                delta = outer - torch.nn.utils.parameters_to_vector(weights).detach()
                delta, comm = (average_int8(dist, torch, delta, world) if outer_dtype == "int8"
                               else mean(dist, delta, world))
                momentum.mul_(OUTER_MOMENTUM).add_(delta)
                outer -= OUTER_LR * (delta + OUTER_MOMENTUM * momentum)
                torch.nn.utils.vector_to_parameters(outer, weights)
        if i >= warmup:
            total = time.monotonic() - t0
            step_s.append(total)
            compute_s.append(total - comm)
    if dist.get_rank() == 0:
        with open(out, "w") as f:
            json.dump({"method": method, "outer_dtype": outer_dtype, "params": sum(w.numel() for w in weights),
                       "inner_steps": inner,
                       "step_s": step_s, "compute_s": compute_s}, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])
