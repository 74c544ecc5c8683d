"""Wall time of the ``slowlink`` command, process start to exit, the way a user waits for it (issue 19):
``--help`` and ``plan`` on the default example (one cluster, and the three of ``make demo``) < 0.3 s, a
131,072-GPU ``plan`` < 1 s; ``--version``, ``collective`` and ``simulate`` reported. Each is the best of
``--repeat`` runs (other processes share the cores), after one warm-up run.

Python's bytecode cache is on in the runs, in a temporary folder (PYTHONPYCACHEPREFIX), as for an installed
package (pip compiles it at install; an editable install writes it on the first run): with
PYTHONDONTWRITEBYTECODE set, as in some sandboxes, every run would compile slowlink's ~60 modules again
(~40-60 ms here). ``--no-bytecode-cache`` measures that case. Exits 1 when a goal is missed.
Run as ``python benchmarks/bench_cli.py [--repeat N] [--no-bytecode-cache]``."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from slowlink.cli.main import GC_THRESHOLD0

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
GOAL_S = 0.3  # --help and the default plan (issue 19)
HUGE_GOAL_S = 1.0  # a 131,072-GPU plan (issue 19)
# The libraries `plan` cannot run without, imported and nothing else, under the command's collector setting:
# the floor under any plan's start-up. numpy (rank placement and crossings), pydantic (the file schemas;
# typer's parameter adapters import it too), typer and its adapters (the command line), rich (the tables),
# yaml (the files).
PLAN_LIBRARIES = (f"import gc; gc.set_threshold({GC_THRESHOLD0}); "
                  "import numpy, pydantic, typer.main, typer._adapters, rich.console, rich.table, yaml")

# A 16,384-node H100 cluster and Llama 3 8B over all of its 131,072 GPUs (TP 8 in the node, DP 16,384).
HUGE_CLUSTER = """name: h100-131k
nodes: 16384
gpus_per_node: 8
gpu: h100-sxm
scale_up: {link: nvlink4, domain_gpus: 8}
nics: {compute: {per_node: 8, speed_gbit_s: 400}}
fabric: {transport: roce, topology: fat-tree, tiers: 3, oversubscription: [1, 1, 7], pod_gpus: 3072}
"""
HUGE_WORKLOAD = """name: llama3-8b-131k
model: {preset: llama3-8b}
training: {global_batch: 32768, micro_batch: 1, precision: bf16, recompute: selective}
parallel: {tp: 8, pp: 1, dp: 16384}
"""


def wall_s(cmd: list[str], repeat: int, env: dict[str, str]) -> float:
    """Best wall time of ``repeat`` runs of ``cmd`` after a warm-up run (output discarded; must exit 0)."""
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-bytecode-cache", action="store_true", help="compile every module on every run")
    args = ap.parse_args()
    ref, w8 = str(EXAMPLES / "ref-64gpu.yaml"), str(EXAMPLES / "llama3-8b.yaml")
    demo = [str(EXAMPLES / f) for f in ("ref-64gpu.yaml", "ref-64gpu-roce.yaml", "ref-64gpu-25gbe.yaml")]
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        if args.no_bytecode_cache:
            env["PYTHONDONTWRITEBYTECODE"] = "1"
        else:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        print(f"bytecode cache: {'off' if args.no_bytecode_cache else 'on'}; best of {args.repeat} after a warm-up")
        huge_c, huge_w = Path(tmp) / "cluster.yaml", Path(tmp) / "workload.yaml"
        huge_c.write_text(HUGE_CLUSTER)
        huge_w.write_text(HUGE_WORKLOAD)
        cases: list[tuple[str, list[str], float | None]] = [
            ("python -c pass (interpreter floor)", ["-c", "pass"], None),
            ("third-party imports a plan needs (floor)", ["-c", PLAN_LIBRARIES], None),
            ("slowlink --help", ["--help"], GOAL_S),
            ("slowlink --version", ["--version"], None),
            ("slowlink plan ref-64gpu llama3-8b", ["plan", ref, w8], GOAL_S),
            ("slowlink plan 3 clusters (make demo)", ["plan", *demo, "--workload", w8], GOAL_S),
            ("slowlink collective ref-64gpu --size 1GiB", ["collective", ref, "--size", "1GiB"], None),
            ("slowlink simulate scenario-two-jobs", ["simulate", str(EXAMPLES / "scenario-two-jobs.yaml")], None),
            ("slowlink plan (131,072 GPUs)", ["plan", str(huge_c), str(huge_w)], HUGE_GOAL_S),
        ]
        ok = True
        for name, argv, goal in cases:
            cmd = [sys.executable, *(argv if argv[0] == "-c" else ["-m", "slowlink", *argv])]
            dt = wall_s(cmd, args.repeat, env)
            verdict = "" if goal is None else f" (goal < {goal:.1f} s) {'ok' if dt < goal else 'MISSED'}"
            ok &= goal is None or dt < goal
            print(f"{name:45s} {dt:6.3f} s{verdict}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
