"""Burst against sustained GEMM throughput on one GPU, with the clocks and power the driver reports.

Usage: ``python benchmarks/gemm_sustained.py OUT_DIR [SECONDS] [N]``

The question it answers: does a GEMM rate measured in a short burst (as MAMF-style sweeps and
``slowlink bench compute`` measure it) hold when the GPU runs GEMMs back to back for minutes, as a training
step does? It runs a bf16 N x N x N matmul back to back for SECONDS (default 150), timing each 2-second
window with CUDA events, while ``nvidia-smi`` logs SM clock, power, temperature and the active clock-event
reasons every 500 ms. Writes ``gemm_sustained.json`` (windows) and ``nvidia_smi.csv`` to OUT_DIR.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def main(argv: list[str]) -> None:
    import torch

    out = Path(argv[0])
    seconds = float(argv[1]) if len(argv) > 1 else 150.0
    n = int(argv[2]) if len(argv) > 2 else 8192
    out.mkdir(parents=True, exist_ok=True)
    query = "timestamp,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu,clocks_event_reasons.active"
    with open(out / "nvidia_smi.csv", "w") as log:
        smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={query}", "--format=csv", "-lms", "500"], stdout=log)
        windows = run(torch, n, seconds)
        smi.terminate()
        smi.wait()
    info = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "n": n, "seconds": seconds, "windows": windows}
    (out / "gemm_sustained.json").write_text(json.dumps(info, indent=1))


def run(torch: Any, n: int, seconds: float) -> list[dict[str, float]]:
    """Back-to-back n^3 bf16 matmuls for ``seconds``: achieved TFLOP/s per 2-second window."""
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    flops = 2.0 * n**3
    for _ in range(3):
        torch.matmul(a, b, out=c)
    torch.cuda.synchronize()
    windows: list[dict[str, float]] = []
    t_start = time.monotonic()
    while time.monotonic() - t_start < seconds:
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t_w = time.monotonic()
        iters = 0
        e0.record()
        while time.monotonic() - t_w < 2.0:
            for _ in range(10):
                torch.matmul(a, b, out=c)
            iters += 10
            if iters % 50 == 0:
                torch.cuda.synchronize()  # keep the host within a few ms of the device
        e1.record()
        torch.cuda.synchronize()
        s = e0.elapsed_time(e1) / 1e3
        windows.append({"t_s": round(t_w - t_start, 2), "iters": iters, "tflops": flops * iters / s / 1e12})
        print(f"{windows[-1]['t_s']:7.1f} s  {windows[-1]['tflops']:7.1f} TFLOP/s", flush=True)
    return windows


if __name__ == "__main__":
    main(sys.argv[1:])
