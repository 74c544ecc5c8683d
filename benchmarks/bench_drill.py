"""Real fault drills on this machine (``slowlink drill``), each fault kind ``--repeats`` times: recovered,
bit-identical, committed and uncommitted steps lost, and the median measured recovery phases next to the
recovery model's prediction. Also the closed form vs Monte Carlo ETTR over the test grid (max difference,
the issue's 2-point goal) and the goodput model's speed. Exits 1 when a drill fails or the ETTR goal is missed.

    PYTHONPATH=src python benchmarks/bench_drill.py [--repeats 1] [--skip-drills] [--emulated]
(--emulated: the drills on a 2-node emulated cluster instead, root; SLOWLINK_EMULATE_STATE is honoured;
--only kill-node: only the drills whose name contains it; --run-prefix kn: the emulated run ids' prefix)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from slowlink.drill.harness import DrillConfig, run_drill
from slowlink.drill.result import DrillResult
from slowlink.reliability.ettr import EttrInputs, ettr_closed_form, ettr_monte_carlo
from slowlink.reliability.failures import default_model

ETTR_GOAL = 0.02  # closed form vs Monte Carlo, the done-when
GRID_GPUS = (512, 2048, 8192, 16384, 32768, 65536, 131072)
GRID_INTERVALS_S = (60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0)
DRILLS = {
    "kill-rank": DrillConfig(fault="kill-rank"),
    "kill-node (4 ranks, 2 per node)": DrillConfig(nproc=4, fault="kill-node", fault_rank=3),
    "hang (SIGSTOP)": DrillConfig(fault="hang", pg_timeout_s=5.0),
    "exception": DrillConfig(fault="exception"),
    "kill-rank as a checkpoint begins (torn)": DrillConfig(fault="kill-rank", fault_step=6, fault_phase="save"),
    "corrupt-checkpoint (8 bytes of a tensor, step 3)": DrillConfig(fault="corrupt-checkpoint"),
    "truncate-checkpoint (half the file, step 3)": DrillConfig(fault="truncate-checkpoint"),
    "kill-launcher (SIGKILL of torchrun alone)": DrillConfig(fault="kill-launcher"),
    "double-launch (same checkpoint directory)": DrillConfig(fault="double-launch"),
    "disk-full (as the step-6 save begins, root)": DrillConfig(fault="disk-full", fault_step=6),
}


EMULATED = {
    "kill-rank": DrillConfig(fault="kill-rank", shutdown_timeout_s=5),
    "hang (SIGSTOP)": DrillConfig(fault="hang", pg_timeout_s=5.0, shutdown_timeout_s=5),
    "exception": DrillConfig(fault="exception", shutdown_timeout_s=5),
    "cut-link (node 1)": DrillConfig(fault="cut-link", shutdown_timeout_s=5),
    "kill-node (node 1's agent + rank, replacement)": DrillConfig(fault="kill-node", shutdown_timeout_s=5),
    "kill-node (node 1, replacement on a spare node)": DrillConfig(fault="kill-node", shutdown_timeout_s=5),
    "kill-node (node 0, rendezvous store on its own node)": DrillConfig(fault="kill-node", fault_rank=0,
                                                                       shutdown_timeout_s=5),
}
FLAT = Path(__file__).resolve().parents[1] / "examples" / "emulate-flat.yaml"


def ettr_grid(segments: int = 20000) -> float:
    """Largest |closed form - Monte Carlo| over job sizes x intervals (checkpoint 30 s, recovery 400 s)."""
    fm, rng, worst = default_model(), np.random.default_rng(0), 0.0
    for g in GRID_GPUS:
        for tau in GRID_INTERVALS_S:
            p = EttrInputs(tau, 30.0, fm.job_rate_per_h(g, 8) / 3600, 400.0, fm.planned_rate_per_h(g, 8) / 3600,
                           330.0)
            worst = max(worst, abs(ettr_closed_form(p) - ettr_monte_carlo(p, rng, segments)))
    return worst


def _median(rs: list[DrillResult], key: str) -> str:
    vals = [v for r in rs if isinstance(v := r.to_json()[key], float)]
    return f"{statistics.median(vals):6.2f}" if vals else "     -"


def drills(repeats: int, emulated: bool, only: str = "", run_prefix: str = "gp") -> bool:
    from slowlink.drill.emulated import run_emulated_drill

    ok = True
    print(f"{'fault':42} ok  lost(c/u) detect restart restore recomp | recovery predicted")
    for name, cfg in (EMULATED if emulated else DRILLS).items():
        if only not in name:
            continue
        spare, store = "spare node" in name, "store on its own node" in name
        rs = [run_emulated_drill(cfg, FLAT, nodes=2, run_prefix=run_prefix, spare=spare, store_node=store) if emulated
              else run_drill(cfg) for _ in range(repeats)]
        ok &= all(r.ok for r in rs)
        r0 = rs[0]
        print(f"{name:42} {'yes' if all(r.ok for r in rs) else 'NO ':3} {r0.committed_steps_lost}/"
              f"{r0.uncommitted_steps_lost}      {_median(rs, 'detect_s')} {_median(rs, 'restart_s')} "
              f"{_median(rs, 'restore_s')} {_median(rs, 'recompute_s')} | {_median(rs, 'recovery_s')} "
              f"{_median(rs, 'predicted_recovery_s')}")
        for r in rs:
            if not r.ok:
                print(f"    FAIL: {r.reason}")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--skip-drills", action="store_true")
    ap.add_argument("--emulated", action="store_true")
    ap.add_argument("--only", default="", help="only the drills whose name contains this")
    ap.add_argument("--run-prefix", default="gp", help="--emulated: run ids (namespaces sl-<id>-...) start so")
    args = ap.parse_args()
    t0 = time.perf_counter()
    worst = ettr_grid()
    print(f"ETTR closed form vs Monte Carlo over {len(GRID_GPUS)} sizes x {len(GRID_INTERVALS_S)} intervals: max "
          f"difference {worst * 100:.2f} points (goal < {ETTR_GOAL * 100:.0f}), {time.perf_counter() - t0:.2f} s")
    ok = worst < ETTR_GOAL
    if not args.skip_drills:
        ok &= drills(args.repeats, args.emulated, args.only, args.run_prefix)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
