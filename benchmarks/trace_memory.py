"""Peak memory of `read kineto` on a large trace: a synthetic trace of SIZE_GB (default 1) made by repeating a
public A100 trace (tests/data/traces/hta-nccl-a100-rank-0.json.gz, 9.8 MB of JSON, 3 steps) with its times and
correlation ids shifted, read in a child process whose peak RSS (getrusage ru_maxrss) is printed next to the
file's size. Run: `python benchmarks/trace_memory.py [SIZE_GB] [DIR]` (the file is written under DIR, default
/tmp, and removed afterwards)."""

from __future__ import annotations

import gzip
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "tests" / "data" / "traces" / "hta-nccl-a100-rank-0.json.gz"
READ = ("import sys, time, resource; from pathlib import Path; from slowlink.trace.kineto import read_kineto; "
        "t = time.perf_counter(); s = read_kineto([Path(sys.argv[1])]); r = s.ranks[0]; "
        "print(r.steps, r.window_steps, len(s.collectives), round(time.perf_counter() - t, 1), "
        "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")


def write_trace(path: Path, size_bytes: float) -> int:
    """Write the repeated trace; returns the number of steps written."""
    with gzip.open(SOURCE, "rt") as fh:
        src = json.load(fh)
    events = src.pop("traceEvents")
    t0 = min(e["ts"] for e in events if "ts" in e)
    span = max(e["ts"] + e.get("dur", 0) for e in events if "ts" in e) - t0
    step = 0
    with path.open("w") as out:
        out.write("{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in src.items()) + ', "traceEvents": [')
        first, k = True, 0
        while out.tell() < size_bytes:
            shift, corr = k * (span + 1000.0), k * 10_000_000
            for e in events:
                e2 = dict(e)
                if "ts" in e2:
                    e2["ts"] = e["ts"] + shift
                args = e2.get("args")
                if isinstance(args, dict) and "correlation" in args:
                    e2["args"] = {**args, "correlation": args["correlation"] + corr}
                if str(e2.get("name", "")).startswith("ProfilerStep#") and e2.get("cat") != "gpu_user_annotation":
                    step += 1
                    e2["name"] = f"ProfilerStep#{step}"
                out.write(("" if first else ",\n") + json.dumps(e2))
                first = False
            k += 1
        out.write("]}\n")
    return step


def main() -> None:
    size_gb = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    where = Path(sys.argv[2]) if len(sys.argv) > 2 else Path("/tmp")
    path = where / "slowlink-big-trace.json"
    t = time.perf_counter()
    steps = write_trace(path, size_gb * 1e9)
    print(f"wrote {path.stat().st_size / 1e9:.2f} GB, {steps} steps, in {time.perf_counter() - t:.0f} s")
    try:
        src = str(Path(__file__).resolve().parents[1] / "src")
        res = subprocess.run([sys.executable, "-c", READ, str(path)], capture_output=True, text=True, check=True,
                             env={"PYTHONPATH": src})
        steps_read, window, colls, secs, rss_kib = res.stdout.split()
        print(f"read: {steps_read} steps ({window} analysed), {colls} collective rows, {secs} s, "
              f"peak RSS {int(rss_kib) / 1024:.0f} MiB")
    finally:
        path.unlink()
    print(f"(this process, which only wrote it: peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB)")


if __name__ == "__main__":
    main()
