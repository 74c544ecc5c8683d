"""``bench compute``: achieved GEMM FLOP/s against shape and dtype, and memory bandwidth, on CPU or GPU.

FLOP/s = 2 m n k / time of ``a @ b`` (a: m x k, b: k x n), the mean over timed iterations after warm-up.
Memory bandwidth = 2 x bytes / time of a large tensor copy (one read, one write). The best GEMM rate per
dtype is the device's measured peak; written as a catalog GPU entry it lets the step model and MFU use
this device (a CPU is described as one rank's share: the cores a rank's threads run on).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import yaml

from slowlink import units
from slowlink.bench.collectives import require_torch
from slowlink.errors import BenchError

DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
DEFAULT_SHAPES = ((512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048))
COPY_BYTES = 256 * units.MiB


def parse_shapes(text: str) -> tuple[tuple[int, int, int], ...]:
    """``1024`` (square) or ``4096x1024x512`` (m x n x k), comma separated."""
    shapes = []
    for part in text.split(","):
        dims = part.strip().lower().split("x")
        try:
            vals = [int(d) for d in dims]
        except ValueError:
            raise BenchError(f"--shapes ({part!r}) must be N or MxNxK with integers, e.g. 1024,4096x1024x512") from None
        if len(vals) not in (1, 3) or min(vals) < 1:
            raise BenchError(f"--shapes ({part!r}) must be N or MxNxK with every dimension >= 1")
        shapes.append((vals[0], vals[0], vals[0]) if len(vals) == 1 else (vals[0], vals[1], vals[2]))
    return tuple(shapes)


def _timeit(torch: Any, fn: Any, device: str, warmup: int, min_time_s: float, max_iters: int) -> float:
    for _ in range(warmup):
        fn()
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    sync()
    n, t0 = 0, time.perf_counter()
    while n < max_iters and (n == 0 or time.perf_counter() - t0 < min_time_s):
        fn()
        n += 1
    sync()
    return (time.perf_counter() - t0) / n


def gemm_rows(shapes: tuple[tuple[int, int, int], ...], dtypes: tuple[str, ...], device: str,
              warmup: int = 2, min_time_s: float = 0.2, max_iters: int = 50) -> list[dict[str, Any]]:
    """One row per shape x dtype: m, n, k, dtype, time_s, flops, tflops."""
    torch = require_torch()
    rows = []
    for name in dtypes:
        if name not in DTYPES:
            raise BenchError(f"--dtypes ({name!r}) must be among {', '.join(DTYPES)}")
        dt = getattr(torch, DTYPES[name])
        for m, n, k in shapes:
            a = torch.randn(m, k, device=device).to(dt)
            b = torch.randn(k, n, device=device).to(dt)
            t = _timeit(torch, lambda a=a, b=b: a @ b, device, warmup, min_time_s, max_iters)
            flops = 2.0 * m * n * k
            rows.append({"m": m, "n": n, "k": k, "dtype": name, "time_s": t, "flops": flops,
                         "tflops": flops / t / units.TFLOPS})
    return rows


def copy_bw_bytes_s(device: str, nbytes: float = COPY_BYTES) -> float:
    """2 x bytes / time of ``dst.copy_(src)``: memory bandwidth as the step model's HBM term sees it."""
    torch = require_torch()
    src = torch.ones(int(nbytes // 4), dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    t = _timeit(torch, lambda: dst.copy_(src), device, 2, 0.2, 50)
    return 2.0 * nbytes / t


def memory_bytes(device: str) -> float:
    """Device memory (GPU) or the host's MemTotal (CPU)."""
    torch = require_torch()
    if device.startswith("cuda"):
        return float(torch.cuda.get_device_properties(0).total_memory)
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return float(line.split()[1]) * units.KiB
    raise BenchError("cannot read MemTotal from /proc/meminfo")


def run_compute(shapes: tuple[tuple[int, int, int], ...], dtypes: tuple[str, ...], threads: int | None,
                device: str | None = None) -> dict[str, Any]:
    """GEMM rows, copy bandwidth and peaks per dtype, on ``device`` (default: cuda if present, else cpu)."""
    torch = require_torch()
    if threads is not None:
        if threads < 1:
            raise BenchError(f"--threads ({threads}) must be >= 1")
        torch.set_num_threads(threads)
    dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
    rows = gemm_rows(shapes, dtypes, dev)
    peaks = {d: max(r["tflops"] for r in rows if r["dtype"] == d) for d in dtypes}
    return {"rows": rows, "device": dev, "threads": torch.get_num_threads(), "peak_tflops": peaks,
            "copy_gbyte_s": copy_bw_bytes_s(dev) / units.GB, "memory_gib": memory_bytes(dev) / units.GiB}


def catalog_entry(summary: dict[str, Any], arch: str) -> dict[str, Any]:
    """A catalog GPU entry with the measured peaks (every dtype must have been measured)."""
    peaks = summary["peak_tflops"]
    missing = [d for d in DTYPES if d not in peaks]
    if missing:
        raise BenchError(f"--catalog-out needs every dtype measured: add {', '.join(missing)} to --dtypes")
    return {"bf16_tflops": peaks["bf16"], "fp16_tflops": peaks["fp16"], "fp8_tflops": None,
            "fp32_tflops": peaks["fp32"], "hbm_gib": summary["memory_gib"], "hbm_gbyte_s": summary["copy_gbyte_s"],
            "arch": arch}


def write_catalog(path: Path, name: str, entry: dict[str, Any], note: str) -> None:
    """A catalog file with one GPU entry, usable from a cluster file's ``catalog:`` list."""
    head = f"# Written by `slowlink bench compute`: measured peaks of {note}.\n"
    path.write_text(head + yaml.safe_dump({"gpus": {name: entry}}, sort_keys=False))
