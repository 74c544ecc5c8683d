"""``bench compute``: achieved GEMM FLOP/s against shape and dtype, and memory bandwidth, on CPU or GPU.

FLOP/s = 2 m n k / time of ``a @ b`` (a: m x k, b: k x n), the mean over timed iterations after warm-up.
Memory bandwidth = 2 x bytes / time of a large tensor copy (one read, one write). The best GEMM rate per
dtype is the device's measured peak; written as a catalog GPU entry it lets the step model and MFU use
this device (a CPU is described as one rank's share: the cores a rank's threads run on).

The entry also carries what the step model's GEMM efficiency needs of this device, measured rather than
assumed: ``gemm_fraction`` 1 (the peak is already an achieved rate), ``sms`` (the GPU's multiprocessors,
a CPU's threads: the width of one wave of output tiles), and ``gemm_k_half``, fitted on a sweep of the
inner dimension (mn x mn x k in the fastest dtype, mn = sweep_mn(device)) to the model's
rate(k) = R * k / (k + k_half): 1/rate = 1/R + (k_half/R) / k is a straight line in 1/k, so a least-squares
line gives k_half = slope / intercept, whatever the sweep shape's own wave loss R
(:func:`fit_k_half`), and ``elementwise_gbyte_s``, the
rate of the layer's elementwise kernels (:func:`elementwise_bw_bytes_s`; memory bound on a GPU, compute
bound on a CPU thread: 1.5-1.8 GB/s for GeLU and LayerNorm against 14 GB/s for an add and 9 GB/s for a
copy, one thread of this project's AVX2 build machine), and ``adam_ns_per_param``, one AdamW step's time
per parameter (:func:`adam_s_per_param`), which the step model's optimizer term uses instead of its
memory-bound estimate.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from slowlink import units
from slowlink.bench.collectives import require_torch
from slowlink.errors import BenchError

DTYPES = {p: units.PRECISION_TORCH[p] for p in ("fp32", "bf16", "fp16")}  # the precisions timed
DEFAULT_SHAPES = ((512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048))
COPY_BYTES = 256 * units.MiB
MAX_CALL_S = 2.0  # a GEMM projected to take longer than this per call is skipped (gemm_rows)
K_SWEEP = (64, 128, 256, 512, 1024, 2048)  # inner dimensions of the k_half sweep
ELEMENTWISE_BYTES = 64 * units.MiB  # activation size of the elementwise measurement
ADAM_PARAMS = 16 * 2**20  # parameters of the AdamW measurement


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
              warmup: int = 2, min_time_s: float = 0.2, max_iters: int = 50,
              max_call_s: float = MAX_CALL_S) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per shape x dtype (m, n, k, dtype, time_s, flops, tflops), smallest shape first, and notes.

    A shape whose one call would take over ``max_call_s`` at the best rate its dtype reached so far is
    skipped with a note: CPUs without native 16-bit GEMMs (AVX2 only) run bf16 and fp16 about 100x slower
    than fp32, and a 2048^3 bf16 GEMM there takes a minute a call.
    """
    torch = require_torch()
    rows, notes = [], []
    for name in dtypes:
        if name not in DTYPES:
            raise BenchError(f"--dtypes ({name!r}) must be among {', '.join(DTYPES)}")
        dt = getattr(torch, DTYPES[name])
        best = 0.0
        for m, n, k in sorted(shapes, key=lambda s: s[0] * s[1] * s[2]):
            if best and 2.0 * m * n * k / best > max_call_s:
                notes.append(f"{name} {m}x{n}x{k} skipped: one call would take "
                             f"{2.0 * m * n * k / best:.0f} s at {best / units.TFLOPS:.4f} TFLOP/s")
                continue
            a = torch.randn(m, k, device=device).to(dt)
            b = torch.randn(k, n, device=device).to(dt)
            t = _timeit(torch, lambda a=a, b=b: a @ b, device, warmup, min_time_s, max_iters)
            flops = 2.0 * m * n * k
            best = max(best, flops / t)
            rows.append({"m": m, "n": n, "k": k, "dtype": name, "time_s": t, "flops": flops,
                         "tflops": flops / t / units.TFLOPS})
    return rows, notes


def sweep_mn(device: str) -> int:
    """m = n of the k sweep: large enough that a GPU is not launch bound at k = 64, small for a CPU."""
    return 1024 if device.startswith("cpu") else 8192


def fit_k_half(rows: list[dict[str, Any]]) -> float:
    """k_half of rate(k) = R k / (k + k_half): the least-squares line 1/rate = a + b/k, k_half = b/a (>= 0)."""
    x = np.array([1.0 / r["k"] for r in rows])
    y = np.array([1.0 / r["tflops"] for r in rows])
    slope, intercept = np.polyfit(x, y, 1)
    return max(0.0, float(slope / intercept)) if intercept > 0 else 0.0


def elementwise_bw_bytes_s(device: str, dtype: str, nbytes: float = ELEMENTWISE_BYTES) -> float:
    """Bytes read + written per second of a layer's elementwise kernels: LayerNorm (forward), GeLU and a
    residual add over an ``nbytes`` activation of width 1024, in ``dtype``: their bytes over their time."""
    torch = require_torch()
    dt = getattr(torch, DTYPES[dtype])
    x = torch.ones(int(nbytes // dt.itemsize) // 1024, 1024, dtype=dt, device=device)
    y = torch.empty_like(x)
    norm = torch.nn.LayerNorm(1024, device=device, dtype=dt)
    kernels = ((lambda: norm(x), 2), (lambda: torch.nn.functional.gelu(x), 2), (lambda: torch.add(x, x, out=y), 3))
    with torch.no_grad():
        seconds = [_timeit(torch, fn, device, 1, 0.2, 50) for fn, _ in kernels]
    return sum(k for _, k in kernels) * nbytes / sum(seconds)


def adam_s_per_param(device: str, params: int = ADAM_PARAMS) -> float:
    """Seconds per parameter of one ``torch.optim.AdamW`` step (fp32 parameters, gradients and states)."""
    torch = require_torch()
    w = torch.nn.Parameter(torch.ones(params, device=device))
    w.grad = torch.full_like(w, 1e-3)
    opt = torch.optim.AdamW([w], lr=1e-4)
    return _timeit(torch, opt.step, device, 1, 0.2, 50) / params


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


@dataclass(frozen=True)
class ComputeRun:
    """A ``bench compute`` run on ``device`` with ``threads``: its GEMM ``rows`` (the record's, as written), the
    ``peak_tflops`` per dtype, ``sms`` (SMs, or threads on a CPU), the fitted ``gemm_k_half`` of the
    ``k_half_dtype`` sweep, copy and elementwise bandwidth, AdamW's ns per parameter, memory, and ``notes``
    (shapes skipped, and why)."""

    rows: list[dict[str, Any]]
    notes: tuple[str, ...]
    device: str
    threads: int
    peak_tflops: dict[str, float]
    sms: int
    gemm_k_half: float
    k_half_dtype: str
    copy_gbyte_s: float
    elementwise_gbyte_s: float
    adam_ns_per_param: float
    memory_gib: float

    def summary(self) -> dict[str, Any]:
        """The record's ``summary`` (and ``--json``'s)."""
        return {"device": self.device, "threads": self.threads, "peak_tflops": dict(self.peak_tflops),
                "sms": self.sms, "gemm_k_half": self.gemm_k_half, "k_half_dtype": self.k_half_dtype,
                "copy_gbyte_s": self.copy_gbyte_s, "elementwise_gbyte_s": self.elementwise_gbyte_s,
                "adam_ns_per_param": self.adam_ns_per_param, "memory_gib": self.memory_gib,
                "notes": list(self.notes)}


def run_compute(shapes: tuple[tuple[int, int, int], ...], dtypes: tuple[str, ...], threads: int | None,
                device: str | None = None) -> ComputeRun:
    """GEMM rows, copy bandwidth and peaks per dtype, on ``device`` (default: cuda if present, else cpu)."""
    torch = require_torch()
    if threads is not None:
        if threads < 1:
            raise BenchError(f"--threads ({threads}) must be >= 1")
        torch.set_num_threads(threads)
    dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
    rows, notes = gemm_rows(shapes, dtypes, dev)
    fastest = max(dtypes, key=lambda d: max(r["tflops"] for r in rows if r["dtype"] == d))
    mn = sweep_mn(dev)
    want = [(mn, mn, k) for k in K_SWEEP]
    done = {(r["m"], r["n"], r["k"]) for r in rows if r["dtype"] == fastest}
    new, more = gemm_rows(tuple(x for x in want if x not in done), (fastest,), dev)
    rows += new
    sweep = [r for r in rows if r["dtype"] == fastest and (r["m"], r["n"], r["k"]) in want]
    peaks = {d: max(r["tflops"] for r in rows if r["dtype"] == d) for d in dtypes}
    sms = torch.cuda.get_device_properties(0).multi_processor_count if dev.startswith("cuda") else \
        torch.get_num_threads()
    return ComputeRun(rows, tuple(notes + more), dev, torch.get_num_threads(), peaks, sms, fit_k_half(sweep), fastest,
                      copy_bw_bytes_s(dev) / units.GB, elementwise_bw_bytes_s(dev, fastest) / units.GB,
                      adam_s_per_param(dev) / units.NS, memory_bytes(dev) / units.GiB)


def catalog_entry(run: ComputeRun, arch: str) -> dict[str, Any]:
    """A catalog GPU entry (the catalog file's mapping) with the measured peaks (every dtype must have been
    measured)."""
    peaks = run.peak_tflops
    missing = [d for d in DTYPES if d not in peaks]
    if missing:
        raise BenchError(f"--catalog-out needs every dtype measured: add {', '.join(missing)} to --dtypes")
    return {"bf16_tflops": peaks["bf16"], "fp16_tflops": peaks["fp16"], "fp8_tflops": None,
            "fp32_tflops": peaks["fp32"], "hbm_gib": run.memory_gib, "hbm_gbyte_s": run.copy_gbyte_s,
            "arch": arch, "sms": run.sms, "gemm_fraction": 1.0, "elementwise_gbyte_s": run.elementwise_gbyte_s,
            "adam_ns_per_param": run.adam_ns_per_param, "gemm_k_half": round(run.gemm_k_half, 1)}


def write_catalog(path: Path, name: str, entry: dict[str, Any], note: str) -> None:
    """A catalog file with one GPU entry, usable from a cluster file's ``catalog:`` list."""
    head = f"# Written by `slowlink bench compute`: measured peaks of {note}.\n"
    path.write_text(head + yaml.safe_dump({"gpus": {name: entry}}, sort_keys=False))
