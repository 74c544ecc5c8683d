"""Kernels, host syncs and exposed seconds of one MoE layer's router and token (un)permutation on one GPU.

Re-enacts, op for op, what Megatron-Core core_r0.10.0 runs per micro-batch and MoE layer for the dgxc-benchmarking
25.02 Grok-1 recipe (router.py TopKRouter with aux_loss; moe_utils.py topk_softmax_with_capacity with capacity
factor 1.0, pad to capacity, drop policy probs; switch_load_balancing_loss_func; permute / unpermute of
token_dispatcher.py MoEAlltoAllTokenDispatcher), written from reading that code. The expert MLPs, the EP
all-to-all, the TP all-gather / reduce-scatter and the tokens-per-expert all-reduce are left out (one GPU): the
expert output is the permuted input. Shapes of the 8-GPU Grok row: n = 4096/4 SP-local tokens, h 6144, 8
experts, top-2.

Prints one JSON object: CUDA kernels and cudaStreamSynchronize calls forward and backward (torch.profiler), and
the seconds the path adds behind a large GEMM that keeps the GPU busy (CPU ahead, as in training), with the
masked_select calls (which sync) and with index_select on precomputed indices (which do not).
Needs a CUDA GPU: python benchmarks/moe_router_kernels.py. Its output on an H200 (torch 2.11, gVisor), 2026-12-04:
benchmarks/data/moe_router_kernels_h200.json (kernels, syncs, summed kernel seconds; the profiler's own
synchronize is one of the counted syncs per pass, the final torch.cuda.synchronize another).
"""

from __future__ import annotations

import json
import math
import sys

import torch


class _AuxScaler(torch.autograd.Function):
    """Attaches the aux loss to a tensor: backward passes the gradient through and a ones-like loss grad."""

    @staticmethod
    def forward(ctx, out: torch.Tensor, aux: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        ctx.save_for_backward(aux)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        (aux,) = ctx.saved_tensors
        return grad, torch.ones_like(aux) * 1.0


# indices of the routing a synced call found, for the sync-free variant: 0 the permutation, 2 the routing map
# [experts, tokens], 1 its flat non-zero positions
FIXED: dict[int, torch.Tensor] = {}


def layer(x: torch.Tensor, w: torch.Tensor, top_k: int, tracker: torch.Tensor, sync: bool) -> torch.Tensor:
    """Router, aux loss, permute and unpermute of one micro-batch; ``sync=False`` uses the indices in FIXED."""
    n, e = x.shape[0], w.shape[0]
    logits = torch.nn.functional.linear(x, w)
    scores, top = torch.topk(logits, k=top_k, dim=1)
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32).type_as(logits)
    gates = torch.zeros_like(logits).scatter(1, top, probs)
    topk_map = torch.zeros_like(logits).int().scatter(1, top, 1).bool()
    tokens_per_expert = topk_map.sum(dim=0)
    capacity = math.ceil(n * top_k / e)
    _, cap_idx = torch.topk(gates, k=capacity, dim=0, sorted=False)
    routing_map = torch.zeros_like(logits).scatter(0, cap_idx, 1).bool()
    final = gates * routing_map
    soft = torch.softmax(logits, dim=-1, dtype=torch.float32)
    aux = torch.sum(soft.sum(dim=0) * tokens_per_expert) * (e * 0.01 / (n * n * top_k))
    tracker[0] += (aux / 0.01).detach()
    final = _AuxScaler.apply(final, aux)
    _ = routing_map.sum(dim=0)  # dispatcher preprocess
    rmap_t = routing_map.T.contiguous()
    if sync:
        idx = torch.arange(n, device=x.device).unsqueeze(0).expand(e, -1).masked_select(rmap_t)
        FIXED[0], FIXED[2] = idx, rmap_t
    else:
        idx = FIXED[0]
    rows = x.index_select(0, idx)
    if sync:
        p = final.T.contiguous().masked_select(rmap_t)
    else:
        p = final.T.contiguous().reshape(-1).index_select(0, FIXED[1])
    rows = rows * p.unsqueeze(-1)
    out = torch.zeros_like(x)
    out.scatter_add_(0, idx.unsqueeze(1).expand(-1, x.shape[1]), rows)
    return out


def profile(fn) -> tuple[int, int, float]:
    """(kernels, cudaStreamSynchronize calls, summed kernel seconds) of one call of ``fn``."""
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        fn()
        torch.cuda.synchronize()
    kernels = [ev for ev in prof.events() if ev.device_type == torch.autograd.DeviceType.CUDA]
    syncs = sum(1 for ev in prof.events() if ev.name in ("cudaStreamSynchronize", "cudaDeviceSynchronize"))
    busy = sum(ev.device_time_total for ev in kernels) * 1e-6 if kernels else 0.0
    return len(kernels), syncs, busy


def main() -> int:
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    n, h, e, k = 1024, 6144, 8, 2
    torch.manual_seed(0)
    x = torch.randn(n, h, device=dev, dtype=torch.bfloat16, requires_grad=True)
    w = (torch.randn(e, h, device=dev, dtype=torch.bfloat16) * 0.01).requires_grad_()
    tracker = torch.zeros(4, device=dev)
    big = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    g = torch.ones(n, h, device=dev, dtype=torch.bfloat16)

    def fwd(sync: bool) -> torch.Tensor:
        return layer(x, w, k, tracker, sync)

    fwd(True)
    FIXED[1] = torch.nonzero(FIXED[2].reshape(-1)).squeeze(1)

    for _ in range(5):
        fwd(True).backward(g)
        fwd(False).backward(g)
    torch.cuda.synchronize()
    result: dict[str, object] = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name()}
    for sync in (True, False):
        out = {}
        outs: list[torch.Tensor] = []
        out["forward"] = profile(lambda: outs.append(fwd(sync)))  # noqa: B023
        out["backward"] = profile(lambda: outs[0].backward(g))  # noqa: B023
        result["profile_sync" if sync else "profile_nosync"] = out

    def timed(body, iters: int = 30) -> float:
        for _ in range(3):
            body()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            body()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) * 1e-3 / iters

    gemm = timed(lambda: big @ big)
    full = timed(lambda: (big @ big, fwd(True).backward(g)))
    nosync = timed(lambda: (big @ big, fwd(False).backward(g)))
    result["gemm_s"] = gemm
    result["exposed_with_syncs_s"] = full - gemm
    result["exposed_without_syncs_s"] = nosync - gemm
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
