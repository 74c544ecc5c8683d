"""``bench train``: a small GPT-style transformer trained for N steps with DDP or FSDP on 1..N ranks.

Per step (mean over timed steps after warm-up), on every rank at once:
  step_time   = zero_grad + forward + backward + AdamW step, wrapped in DDP / FSDP (fully_shard);
  compute     = the same on a local copy of the model, with no communication at all;
  exposed     = max(0, step_time - compute); comm_compute_ratio = exposed / compute (the plan's ratio);
  comm        = the step's collectives alone (DDP: all_reduce of the fp32 gradients; FSDP: all_gather of
                the parameters + reduce_scatter of the gradients), so comm / compute is the unoverlapped ratio;
  MFU         = model FLOPs / (step_time x ranks x peak), model FLOPs per token = 6 N + 6 L s h
                (N: parameters without the embedding, L layers, s sequence, h hidden; causal attention;
                PaLM, Chowdhery et al. 2022, App. B), peak = the device's measured GEMM rate in the
                run's precision.
Precision: bf16 or fp16 autocast (parameters and gradients stay fp32), or fp32 throughout; ``auto`` is
bf16 on a GPU and, on a CPU, whichever of bf16 and fp32 runs a 512^3 GEMM faster there
(:func:`fastest_precision`): a CPU without native bf16 (AVX2 only) runs bf16 GEMMs about 100x slower
than fp32 (0.84 against 100 GFLOP/s on 2 threads of this project's AVX2 EPYC build machine).
``profile``: rank 0 runs ``steps`` more compute-only steps under torch.profiler, after the timed ones (so
``compute_s`` carries no profiler overhead; the profiled wall per step shows it), and the row's ``profile`` holds
their seconds per step by kernel class and idle (:mod:`slowlink.bench.profile`). ``trace_dir``: after the
timed distributed steps, every rank runs ``steps`` more under torch.profiler and writes a Chrome trace of them
(``<trace_dir>/<mode>-<N>ranks/rank-<r>.json.gz``), the input of ``slowlink read kineto``. Under autocast the fp32
weights are cast to bf16/fp16 at every use: that copy traffic is real and lands in ``elementwise``.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass, replace
from typing import Any

from slowlink import units
from slowlink.bench.record import RankRows
from slowlink.errors import BenchError

MODES = ("ddp", "fsdp")
PRECISIONS = ("auto", "bf16", "fp16", "fp32")


@dataclass(frozen=True)
class TrainConfig:
    """Model shape, batch and the measurement's steps."""

    mode: str = "ddp"
    layers: int = 4
    hidden: int = 512
    heads: int = 8
    ffn_hidden: int = 2048
    vocab: int = 8192
    seq_len: int = 256
    batch: int = 4          # sequences per rank per step (the micro-batch; one micro-batch per step)
    steps: int = 8
    warmup_steps: int = 2
    precision: str = "auto"  # bf16/fp16 autocast (parameters and gradients stay fp32), fp32, or auto
    threads: int | None = None
    seed: int = 0
    profile: bool = False    # rank 0 profiles extra compute-only steps by kernel class (module docstring)
    trace_dir: str | None = None  # every rank writes a torch.profiler trace of extra distributed steps here

    def check(self) -> None:
        if self.mode not in MODES:
            raise BenchError(f"--mode ({self.mode!r}) must be one of {', '.join(MODES)}")
        if self.hidden % self.heads:
            raise BenchError(f"--hidden ({self.hidden}) must be divisible by --heads ({self.heads})")
        for name in ("layers", "hidden", "heads", "ffn_hidden", "vocab", "seq_len", "batch", "steps"):
            if getattr(self, name) < 1:
                raise BenchError(f"--{name.replace('_', '-')} ({getattr(self, name)}) must be >= 1")
        if self.warmup_steps < 0:
            raise BenchError(f"--warmup-steps ({self.warmup_steps}) must be >= 0")
        if self.precision not in PRECISIONS:
            raise BenchError(f"--precision ({self.precision!r}) must be one of {', '.join(PRECISIONS)}")


def model_params(cfg: TrainConfig) -> tuple[int, int]:
    """(parameters without the embedding, embedding parameters) of :func:`build_model`."""
    h, f = cfg.hidden, cfg.ffn_hidden
    block = (h * 3 * h + 3 * h) + (h * h + h) + (h * f + f) + (f * h + h) + 4 * h
    return cfg.layers * block + 2 * h + h * cfg.vocab + cfg.vocab, cfg.vocab * h


def model_flops_per_step(cfg: TrainConfig, ranks: int) -> float:
    """(6 N + 6 L s h) x tokens of the whole step (module docstring)."""
    n, _ = model_params(cfg)
    tokens = cfg.batch * cfg.seq_len * ranks
    return (6.0 * n + 6.0 * cfg.layers * cfg.seq_len * cfg.hidden) * tokens


def build_model(cfg: TrainConfig) -> Any:
    """Embedding, ``layers`` pre-norm blocks (fused QKV, causal SDPA, GeLU MLP), final norm, logits."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            h = cfg.hidden
            self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
            self.qkv, self.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
            self.fc1, self.fc2 = nn.Linear(h, cfg.ffn_hidden), nn.Linear(cfg.ffn_hidden, h)

        def forward(self, x: Any) -> Any:
            b, s, h = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, cfg.heads, h // cfg.heads).permute(2, 0, 3, 1, 4)
            a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, s, h))
            return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))

    class Gpt(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(cfg.vocab, cfg.hidden)
            self.blocks = nn.ModuleList(Block() for _ in range(cfg.layers))
            self.ln = nn.LayerNorm(cfg.hidden)
            self.out = nn.Linear(cfg.hidden, cfg.vocab)

        def forward(self, tokens: Any) -> Any:
            x = self.emb(tokens)
            for blk in self.blocks:
                x = blk(x)
            return self.out(self.ln(x))

    torch.manual_seed(cfg.seed)
    return Gpt()


def _sync(torch: Any, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def fastest_precision(device: str, n: int = 512) -> str:
    """``auto``: bf16 on a GPU; on a CPU the faster of bf16 and fp32 for one n^3 GEMM (``bench compute``'s
    timing: mean of 3 calls after one)."""
    if not device.startswith("cpu"):
        return "bf16"
    from slowlink.bench.compute import gemm_rows

    rows, _ = gemm_rows(((n, n, n),), ("bf16", "fp32"), device, warmup=1, min_time_s=0.0, max_iters=3)
    return str(max(rows, key=lambda r: r["tflops"])["dtype"])


def _time_steps(torch: Any, model: Any, cfg: TrainConfig, device: str, barrier: Any,
                profile: bool = False, trace_path: str | None = None) -> tuple[float, dict[str, float] | None]:
    """Mean seconds per optimizer step after warm-up; with ``profile``, the breakdown of ``steps`` more steps;
    with ``trace_path``, a Chrome trace of ``steps`` more steps written there (:func:`_trace_steps`)."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device="cpu").manual_seed(cfg.seed + int(os.environ.get("RANK", "0")))
    tokens = torch.randint(0, cfg.vocab, (cfg.batch, cfg.seq_len + 1), generator=gen).to(device)
    dtype = units.torch_dtype(torch, cfg.precision)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.split(":")[0], dtype=dtype, enabled=cfg.precision != "fp32"):
            logits = model(tokens[:, :-1])
        loss = loss_fn(logits.float().reshape(-1, cfg.vocab), tokens[:, 1:].reshape(-1))
        loss.backward()
        opt.step()

    for _ in range(cfg.warmup_steps):
        step()
    _sync(torch, device)
    barrier()
    t0 = time.perf_counter()
    for _ in range(cfg.steps):
        step()
    _sync(torch, device)
    mean_s = (time.perf_counter() - t0) / cfg.steps
    if trace_path is not None:
        _trace_steps(torch, step, cfg.steps, device, trace_path)
    return mean_s, (_profile_steps(torch, step, cfg.steps, device) if profile else None)


def _trace_steps(torch: Any, step: Any, steps: int, device: str, path: str) -> None:
    """``steps`` steps under torch.profiler (CPU ops with their shapes, and CUDA kernels on a GPU), one
    ``ProfilerStep#N`` each after one warm-up step the profiler discards, exported as a Chrome trace to ``path``
    (gzip'd when it ends in .gz, torch.profiler's ``export_chrome_trace``): what ``slowlink read kineto`` reads."""
    from torch.profiler import ProfilerActivity, profile, schedule

    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if device.startswith("cuda") else [])]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with profile(activities=activities, record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=steps, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
        for _ in range(steps + 1):
            step()
            _sync(torch, device)
            prof.step()


def _profile_steps(torch: Any, step: Any, steps: int, device: str) -> dict[str, float]:
    """``steps`` steps under torch.profiler after one the profiler warms up on and discards (its start-up costs
    most: torch.profiler.schedule's ``warmup``), classed per step (:func:`slowlink.bench.profile.breakdown`)."""
    from torch.profiler import ProfilerActivity, profile, schedule

    from slowlink.bench.profile import breakdown, records_of

    cuda = device.startswith("cuda")
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]
    with profile(activities=activities, schedule=schedule(wait=0, warmup=1, active=steps, repeat=1)) as prof:
        step()
        _sync(torch, device)
        prof.step()  # warm-up over: recording starts
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        _sync(torch, device)
        wall_s = time.perf_counter() - t0
        prof.step()  # the active steps end: the trace is collected
    return breakdown(records_of(prof.events(), device), wall_s, steps, device_kernels=cuda)


def _comm_only(torch: Any, dist: Any, cfg: TrainConfig, world: int, device: str) -> float:
    """Seconds of the step's collectives alone (module docstring), mean of ``steps`` repeats."""
    if world == 1:
        return 0.0
    n, e = model_params(cfg)
    count = math.ceil((n + e) / world) * world
    grads = torch.ones(count, dtype=torch.float32, device=device)
    shard = torch.empty(count // world, dtype=torch.float32, device=device)

    def once() -> None:
        if cfg.mode == "ddp":
            dist.all_reduce(grads)
        else:
            dist.all_gather_single(grads, shard)
            dist.reduce_scatter_single(shard, grads)

    once()
    _sync(torch, device)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(cfg.steps):
        once()
    _sync(torch, device)
    return (time.perf_counter() - t0) / cfg.steps


def _wrap(model: Any, cfg: TrainConfig, ctx: Any) -> Any:
    if ctx.world == 1:
        return model
    if cfg.mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model, device_ids=None if ctx.device == "cpu" else [ctx.local_rank])
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(ctx.device.split(":")[0], (ctx.world,))
    for blk in model.blocks:
        fully_shard(blk, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def train_rank(cfg: TrainConfig, ctx: Any) -> RankRows:
    """A rank's job (the launcher's target): compute-only, distributed steps, comm alone; max over ranks,
    and every rank's own step and compute time (``rank_step_s``, ``rank_compute_s``, by rank)."""
    import socket

    import torch
    import torch.distributed as dist

    threads = cfg.threads or max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    torch.set_num_threads(threads)
    if cfg.precision == "auto":
        chosen: list[Any] = [fastest_precision(ctx.device) if ctx.rank == 0 else None]
        dist.broadcast_object_list(chosen, src=0)
        cfg = replace(cfg, precision=str(chosen[0]))
    compute_s, profiled = _time_steps(torch, build_model(cfg).to(ctx.device), cfg, ctx.device, dist.barrier,
                                      profile=cfg.profile and ctx.rank == 0)
    trace = (None if cfg.trace_dir is None
             else os.path.join(cfg.trace_dir, f"{cfg.mode}-{ctx.world}ranks", f"rank-{ctx.rank}.json.gz"))
    step_s, _ = _time_steps(torch, _wrap(build_model(cfg).to(ctx.device), cfg, ctx), cfg, ctx.device,
                            dist.barrier, trace_path=trace)
    comm_s = _comm_only(torch, dist, cfg, ctx.world, ctx.device)
    mine = torch.tensor([step_s, compute_s, comm_s], dtype=torch.float64, device=ctx.device)
    every = [torch.empty_like(mine) for _ in range(ctx.world)]
    dist.all_gather(every, mine)  # each rank's own times: the per-rank record a slow GPU shows up in
    per_rank = [[float(x) for x in t] for t in every]
    step_s, compute_s, comm_s = (max(r[i] for r in per_rank) for i in range(3))
    hosts: list[str] = [""] * ctx.world
    dist.all_gather_object(hosts, socket.gethostname())
    exposed = max(0.0, step_s - compute_s)
    n, e = model_params(cfg)
    row = {"mode": cfg.mode, "ranks": ctx.world, "threads_per_rank": threads, "precision": cfg.precision,
           "params": n + e, "tokens_per_step": cfg.batch * cfg.seq_len * ctx.world,
           "model_flops_per_step": model_flops_per_step(cfg, ctx.world), "step_time_s": step_s,
           "compute_s": compute_s, "exposed_comm_s": exposed, "comm_s": comm_s,
           "comm_compute_ratio": exposed / compute_s, "unoverlapped_comm_compute_ratio": comm_s / compute_s,
           "rank_step_s": [r[0] for r in per_rank], "rank_compute_s": [r[1] for r in per_rank]}
    if profiled is not None:
        row["profile"] = profiled
    return RankRows([row], hosts)


def config_dict(cfg: TrainConfig) -> dict[str, Any]:
    return asdict(cfg)
