"""Speed of the shared-cluster simulation (issue 20): 10^5 jobs on 1,000 GPUs (125 nodes of 8) in under a
minute, for gang scheduling on whole GPUs and for per-GPU allocation; a MIG and a time-slicing run of 10^4
jobs reported (no goal). The stream loads the cluster to ~85% (Poisson arrivals, exponential run times).
Prints the median of ``--repeat`` runs; exits 1 when a goal is missed."""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

from slowlink import units
from slowlink.share.jobs import Job, JobClass, synthetic_jobs
from slowlink.share.scenario import Shape
from slowlink.share.sim import simulate_policy
from slowlink.spec.share import Policy

GOAL_S = 60.0  # issue 20: 10^5 jobs on 1,000 GPUs in under a minute
SHAPE = Shape(125, 8, "h100-sxm", 79.6 * units.GiB)
CLASSES = (JobClass("inference", 4, (1,), 1800.0, 0.25, 10 * units.GiB),
           JobClass("training", 4, (1, 2, 4, 8), 3600.0, 1.0, 60 * units.GiB),
           JobClass("training", 1, (16, 32, 64), 7200.0, 1.0, 60 * units.GiB))


def stream(n: int) -> list[Job]:
    """``n`` jobs whose mean demand is ~85% of the 1,000 GPUs."""
    gpu_s = sum(c.share * float(np.mean(c.gpus)) * c.mean_duration_s for c in CLASSES) / sum(c.share for c in CLASSES)
    return synthetic_jobs(n, gpu_s / (0.85 * SHAPE.gpus), CLASSES, np.random.default_rng(0))


def timed(policy: Policy, jobs: list[Job], repeat: int) -> tuple[float, str]:
    times, line = [], ""
    for _ in range(repeat):
        t = time.perf_counter()
        r = simulate_policy(SHAPE, policy, jobs, 4, 0.76)
        times.append(time.perf_counter() - t)
        line = (f"finished {r.finished}/{r.jobs}, utilisation {r.utilisation:.1%}, fragmentation "
                f"{r.fragmentation:.1%}, mean queue {r.mean_queue_s:.0f} s, deadlocks {len(r.deadlocks)}")
    return statistics.median(times), line


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    big, small = stream(args.jobs), stream(args.jobs // 10)
    ok = True
    for policy, jobs, goal in ((Policy(scheduler="gang"), big, GOAL_S),
                               (Policy(scheduler="per-gpu"), big, GOAL_S),
                               (Policy(scheduler="gang", slicing="mig"), small, None),
                               (Policy(scheduler="gang", slicing="timeslice"), small, None)):
        s, line = timed(policy, jobs, args.repeat)
        verdict = "" if goal is None else (" ok" if s < goal else f" MISSED (goal {goal:.0f} s)")
        ok &= goal is None or s < goal
        print(f"{policy.label:>16}: {len(jobs):>7} jobs on {SHAPE.gpus} GPUs in {s:6.2f} s{verdict}  ({line})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
