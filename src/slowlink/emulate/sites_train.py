"""A small model trained across the emulated sites by DDP or DiLoCo over gloo (`python -m
slowlink.emulate.sites_train`).

Usage: ``python -m slowlink.emulate.sites_train METHOD PARAMS STEPS WARMUP H OUT``.

Each node runs one rank (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the emulation's environment). The model
is two bias-free square linear layers of ``PARAMS`` parameters in all (fp32), trained on random inputs by SGD;
every rank starts from the same seed, so no broadcast crosses the sites. Per step:

  ddp     forward, backward, one all_reduce of the flattened gradient, the SGD step
  diloco  forward, backward, the SGD step; every H steps the pseudo-gradient (the outer parameters minus this
          rank's) is all_reduced and averaged, and the outer Nesterov step (lr 0.7, momentum 0.9: DiLoCo's,
          Douillard et al. 2023) moves the outer parameters, which every rank then takes

Rank 0 writes ``{"method", "params", "inner_steps", "step_s", "compute_s"}`` as JSON to OUT: the wall time of
each timed step and its compute part (forward, backward and the SGD step), after ``WARMUP`` steps.
"""

from __future__ import annotations

import json
import math
import sys
import time
from datetime import timedelta

BATCH = 32
OUTER_LR, OUTER_MOMENTUM = 0.7, 0.9  # DiLoCo's outer Nesterov (Douillard et al. 2023, Sec. 3)


def main(argv: list[str]) -> None:
    import torch
    import torch.distributed as dist

    method, params, steps, warmup, inner, out = argv[0], int(argv[1]), int(argv[2]), int(argv[3]), int(argv[4]), argv[5]
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
                tc = time.monotonic()
                delta = outer - torch.nn.utils.parameters_to_vector(weights).detach()
                dist.all_reduce(delta)
                delta /= world
                momentum.mul_(OUTER_MOMENTUM).add_(delta)
                outer -= OUTER_LR * (delta + OUTER_MOMENTUM * momentum)
                torch.nn.utils.vector_to_parameters(outer, weights)
                comm = time.monotonic() - tc
        if i >= warmup:
            total = time.monotonic() - t0
            step_s.append(total)
            compute_s.append(total - comm)
    if dist.get_rank() == 0:
        with open(out, "w") as f:
            json.dump({"method": method, "params": sum(w.numel() for w in weights), "inner_steps": inner,
                       "step_s": step_s, "compute_s": compute_s}, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])
