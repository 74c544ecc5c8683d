"""Record Holistic Trace Analysis's per-rank numbers for every GPU trace in tests/data/traces (run once, with HTA
installed: `pip install HolisticTraceAnalysis`; slowlink's tests compare `read kineto` with the file it writes).

    python benchmarks/trace_hta_reference.py > tests/data/traces/hta_reference.json

Per rank, from HTA's TraceAnalysis (each file alone, so that the kernel-type breakdown, which HTA sums over ranks,
is that rank's): get_temporal_breakdown (kernel, idle, compute time), get_gpu_kernel_breakdown with memory kernels
(communication = every row naming COMMUNICATION, memory = every row naming MEMORY: the union of that kind's
kernels), get_comm_comp_overlap (its percentage, rounded by HTA to 2 decimals).
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
import tempfile
from pathlib import Path

GPU_TRACES = ("hta-vit-rank-0.json.gz", "hta-vit-rank-1.json.gz", "hta-nccl-a100-rank-0.json.gz",
              "hta-mi250-rank-0.json.gz")


def hta_numbers(path: Path) -> dict[str, float]:
    from hta.trace_analysis import TraceAnalysis

    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(path, tmp)
        a = TraceAnalysis(trace_dir=tmp)
        tb = a.get_temporal_breakdown(visualize=False).iloc[0]
        kt, _ = a.get_gpu_kernel_breakdown(visualize=False, include_memory_kernels=True)
        ov = a.get_comm_comp_overlap(visualize=False).iloc[0]
    by_type = {str(r["kernel_type"]): float(r["sum"]) for _, r in kt.iterrows()}
    overlap = float(ov["comp_comm_overlap_pctg"]) / 100
    return {"kernel_s": float(tb["kernel_time(us)"]) * 1e-6, "idle_s": float(tb["idle_time(us)"]) * 1e-6,
            "compute_s": float(tb["compute_time(us)"]) * 1e-6,
            "communication_s": sum(v for k, v in by_type.items() if "COMMUNICATION" in k) * 1e-6,
            "memory_s": sum(v for k, v in by_type.items() if "MEMORY" in k) * 1e-6,
            "comm_comp_overlap": overlap if overlap == overlap else 0.0}  # NaN (no communication) -> 0


def main() -> None:
    import hta
    import pandas

    logging.disable(logging.WARNING)
    here = Path(__file__).resolve().parents[1] / "tests" / "data" / "traces"
    version = getattr(hta, "__version__", None)
    if version is None:
        from importlib.metadata import version as dist_version

        version = dist_version("HolisticTraceAnalysis")
    out = {"hta_version": version, "pandas_version": pandas.__version__,
           "traces": {name: hta_numbers(here / name) for name in GPU_TRACES}}
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
