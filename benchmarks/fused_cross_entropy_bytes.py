"""HBM bytes per logit of Megatron-Core's two vocab-parallel cross-entropy paths, measured on one GPU.

Re-enacts, op for op, Megatron-Core core_r0.10.0 (github.com/NVIDIA/Megatron-LM):
  megatron  tensor_parallel/cross_entropy.py, eager (cross_entropy_loss_fusion false): ``.float()``, max,
            ``-= max``, ``exp(out=)``, sum, ``div_``; backward the target update, ``mul_``, and autograd's cast
            of the fp32 gradient back to bf16.
  fused     fusions/fused_cross_entropy.py (cross_entropy_loss_fusion true): the same static methods inside four
            ``jit_fuser`` functions, which core/jit.py sets to ``torch.compile`` from torch 2.2 on;
            the gradient is cast to bf16 inside the last one.
tp = 1 (the TP all-reduces of [tokens] values are left out). Shapes of the dgxc Llama 3.1 70B row: 4096 tokens
(seq 8192 / cp 2) x 128512 / tp 4 = 32128 logits each, bf16 in.

Prints one JSON object: per path the seconds of forward + backward (median of 20 after 5 warm-ups, CUDA
events), the CUDA kernels it launched (torch.profiler), and its bytes per logit at the measured copy rate
(a device-to-device copy of the same fp32 tensor, read + written bytes / time). slowlink.workload.loss counts
52 (megatron) and 32 (fused) bytes per bf16 logit from the code.
Needs a CUDA GPU: python benchmarks/fused_cross_entropy_bytes.py. Its output on an H200 (torch 2.11, gVisor),
2026-12-04, from a condensed copy of this script (same ops, sent inline to the device):
benchmarks/data/fused_cross_entropy_bytes_h200.json (megatron 2.30 ms, 70 bytes per logit, 28 kernels; fused 1.27 ms,
38 bytes, 9 kernels: one Triton kernel per full-size pass counted, plus small ones on the [tokens] vectors).
"""

from __future__ import annotations

import json
import statistics

import torch

TOKENS, VOCAB_LOCAL = 4096, 32128


def _max(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x = x.float()
    return x, torch.max(x, dim=-1)[0]


def _predicted(x: torch.Tensor, target: torch.Tensor, mx: torch.Tensor, lo: int,
               hi: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    x -= mx.unsqueeze(-1)
    mask = (target < lo) | (target >= hi)
    mt = target.clone() - lo
    mt[mask] = 0
    x2 = x.view(-1, x.size(-1))
    mt1 = mt.view(-1)
    rows = torch.arange(0, x2.size(0), device=x2.device)
    pred = x2[rows, mt1].clone().contiguous().view_as(target)
    pred[mask] = 0.0
    torch.exp(x, out=x)
    return mask, mt1, torch.cat((pred, x.sum(dim=-1))), x


def _loss(e: torch.Tensor, ps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    pred, s = torch.split(ps, ps.size(0) // 2)
    loss = torch.log(s) - pred
    e.div_(s.unsqueeze(-1))
    return e, loss


def _grad(sm: torch.Tensor, go: torch.Tensor, mask: torch.Tensor, mt1: torch.Tensor, cast: bool) -> torch.Tensor:
    g2 = sm.view(-1, sm.size(-1))
    rows = torch.arange(0, g2.size(0), device=g2.device)
    g2[rows, mt1] -= 1.0 - mask.view(-1).float()
    sm.mul_(go.unsqueeze(-1))
    return sm.to(torch.bfloat16) if cast else sm


FUSED = [torch.compile(f) for f in (_max, _predicted, _loss, _grad)]


def run(path: str, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Forward and backward of one path; the returned bf16 gradient of the logits."""
    f = FUSED if path == "fused" else [_max, _predicted, _loss, _grad]
    x, mx = f[0](logits)
    mask, mt1, ps, e = f[1](x, target, mx, 0, logits.size(-1))
    sm, loss = f[2](e, ps)
    g = f[3](sm, torch.ones_like(loss), mask, mt1, path == "fused")
    return g if path == "fused" else g.to(torch.bfloat16)  # eager: autograd's ToCopyBackward


def _time_s(fn, reps: int = 20) -> float:
    for _ in range(5):
        fn()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(b) / 1e3)
    return statistics.median(out)


def main() -> None:
    dev = torch.device("cuda")
    logits = torch.randn(TOKENS, VOCAB_LOCAL, device=dev).bfloat16()
    target = torch.randint(0, VOCAB_LOCAL, (TOKENS,), device=dev)
    n = logits.numel()
    ref = torch.nn.functional.cross_entropy(logits.float(), target, reduction="none")
    src, dst = torch.empty(n, device=dev), torch.empty(n, device=dev)
    copy_s = _time_s(lambda: dst.copy_(src))
    copy_bw = 8.0 * n / copy_s
    result: dict[str, object] = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                                 "tokens": TOKENS, "vocab_local": VOCAB_LOCAL, "copy_bytes_s": copy_bw}
    for path in ("megatron", "fused"):
        g = run(path, logits, target)
        soft = torch.softmax(logits.float(), -1)
        soft[torch.arange(TOKENS, device=dev), target] -= 1.0
        ok = torch.allclose(g.float(), soft, atol=2e-2)
        t = _time_s(lambda p=path: run(p, logits, target))
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            run(path, logits, target)
            torch.cuda.synchronize()
        kernels = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        result[path] = {"seconds": t, "bytes_per_logit": t * copy_bw / n, "gradient_ok": ok,
                        "kernels": len(kernels), "kernel_names": kernels}
    result["loss_ref_finite"] = bool(torch.isfinite(ref).all())
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
