"""How much a GEMM slows when memory traffic runs beside it on the same GPU: the part of tensor-parallel overlap the
step model's SM-share rule leaves out (issue 13, the TP >= 4 rows' common gap).

Usage: ``python benchmarks/overlap_contention.py OUT_DIR [REPS]``   (one CUDA GPU; Triton for the 16-SM case)

Transformer Engine's userbuffers run a layer's TP collectives beside its GEMMs: ring-exchange copies over NVLink
(copy engine, no SMs, but they read and write HBM at NVLink speed on both GPUs), and pipeline/bulk kernels on
num_sm SMs (16 by default) that the GEMM does not leave free unless set_sm_margin. The step model charges
overlapped communication only the SMs it holds (``traffic.overlap_contention_s``: 24 of 132), not HBM bandwidth.
With one GPU neither NVLink nor a peer exists, so this measures the two halves that one GPU can show, for the GEMM
chunks userbuffers issues (m = 512-2048 rows of GPT-3 175B's TP-4 layer GEMMs, bf16):
  alone     the GEMM back to back, CUDA events around REPS calls;
  copy      the same while another stream copies 256 MiB buffers back to back (``Tensor.copy_``: the device's own
            copy path, whatever engine the driver gives it), the traffic a ring exchange puts on each GPU's HBM;
  sm16      the same while a Triton kernel of 16 programs streams a buffer (each program loops over its share, so
            it holds about 16 SMs for the whole window): a userbuffers pipeline/bulk kernel's footprint.
The background is queued first and sized to outlast the timed GEMMs; its achieved bandwidth during the window is
reported too (bytes moved / its own events' time). Writes ``overlap_contention.json`` to OUT_DIR: per shape and
background, the GEMM's seconds alone and beside it, the slowdown, the background's GB/s, and what the step model's
rule would charge (share x the window: 16 of the GPU's SMs for sm16, 0 for copy).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

# (m, n, k): GPT-3 175B at TP 4 (h 12288): QKV (n = 3h/4), FC1/FC2 (n = k = h), proj (k = h/4); m = the chunk rows
SHAPES = [(m, n, k) for m in (512, 1024, 2048) for n, k in ((9216, 12288), (12288, 12288), (12288, 3072))]
COPY_BYTES = 256 * 2**20
SM_PROGRAMS = 16  # TE v1.13 default num_sm for pipeline and bulk methods (initialize_ub get_default_config)


def main(argv: list[str]) -> None:
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("overlap_contention: needs a CUDA GPU (run it on a lent machine)")
    out = Path(argv[0])
    reps = int(argv[1]) if len(argv) > 1 else 50
    out.mkdir(parents=True, exist_ok=True)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    backgrounds: dict[str, Any] = {"copy": copy_background(torch)}
    try:
        backgrounds["sm16"] = triton_background(torch)
    except Exception as e:  # report it and go on with the copy case
        print(f"sm16 background unavailable: {e!r}", file=sys.stderr)
    rows = []
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        alone = time_gemm(torch, a, b, reps)
        for name, bg in backgrounds.items():
            beside, bg_gbyte_s = time_gemm_beside(torch, a, b, reps, bg, alone)
            share = SM_PROGRAMS / sms if name == "sm16" else 0.0
            rows.append({"m": m, "n": n, "k": k, "background": name, "alone_s": alone, "beside_s": beside,
                         "slowdown": beside / alone - 1.0, "background_gbyte_s": bg_gbyte_s,
                         "sm_share_rule_slowdown": share,
                         "tflops_alone": 2.0 * m * n * k / alone / 1e12})
            print(json.dumps(rows[-1]))
    info = {"gpu": torch.cuda.get_device_name(), "sms": sms, "torch": torch.__version__, "cuda": torch.version.cuda,
            "reps": reps, "rows": rows}
    (out / "overlap_contention.json").write_text(json.dumps(info, indent=1))


def time_gemm(torch: Any, a: Any, b: Any, reps: int) -> float:
    """Seconds per GEMM, ``reps`` back to back after 3 warm-ups."""
    for _ in range(3):
        a @ b
    return _per_call_s(torch, lambda: a @ b, reps)


def _per_call_s(torch: Any, fn: Any, reps: int) -> float:
    """Seconds per call of ``fn`` run ``reps`` times back to back on the current stream, by CUDA events
    (synchronises)."""
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(reps):
        fn()
    e1.record()
    torch.cuda.synchronize()
    return float(e0.elapsed_time(e1)) / 1e3 / reps


def time_gemm_beside(torch: Any, a: Any, b: Any, reps: int, bg: Any, alone_s: float) -> tuple[float, float]:
    """Seconds per GEMM while ``bg`` runs on another stream (queued first, sized to outlast reps x 3 x alone),
    and the background's GB/s over its own run."""
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    b0, b1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(side):
        b0.record()
        moved = bg(3.0 * reps * alone_s + 2e-3)
        b1.record()
    per_gemm = _per_call_s(torch, lambda: a @ b, reps)
    return per_gemm, moved / (float(b0.elapsed_time(b1)) / 1e3) / 1e9


def copy_background(torch: Any) -> Any:
    """A background of back-to-back 256 MiB device-to-device copies lasting at least ``seconds`` (at the rate one
    copy measured alone): returns the bytes it will move (read + write)."""
    src = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    dst.copy_(src)
    one_s = _per_call_s(torch, lambda: dst.copy_(src), 5)

    def run(seconds: float) -> float:
        count = int(seconds / one_s) + 2
        for _ in range(count):
            dst.copy_(src)
        return 2.0 * COPY_BYTES * count

    return run


def triton_background(torch: Any) -> Any:
    """A background kernel of SM_PROGRAMS Triton programs, each streaming its share of a buffer ``loops`` times."""
    import triton
    import triton.language as tl

    @triton.jit
    def stream(src, dst, n, loops, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        step = tl.num_programs(0) * BLOCK
        for _ in range(loops):
            for start in range(pid * BLOCK, n, step):
                offs = start + tl.arange(0, BLOCK)
                mask = offs < n
                tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)

    n = COPY_BYTES // 4
    src = torch.randn(n, device="cuda", dtype=torch.float32)
    dst = torch.empty_like(src)

    def launch(loops: int) -> None:
        stream[(SM_PROGRAMS,)](src, dst, n, loops, BLOCK=4096)

    launch(1)
    one_s = _per_call_s(torch, lambda: launch(2), 1) / 2  # per pass over the buffer

    def run(seconds: float) -> float:
        loops = int(seconds / one_s) + 1
        launch(loops)
        return 2.0 * 4 * n * loops

    return run


if __name__ == "__main__":
    main(sys.argv[1:])
