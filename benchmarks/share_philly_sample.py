"""The Philly sample next to its paper (issue 20): what the shipped sample itself carries (GPUs per job, run
times, the queueing delay the trace recorded) and what `slowlink share` gives when it replays the sample at its
recorded times on Philly's 8-GPU servers and on fewer of them. Prints numbers only: the published ones, their
sources and what is comparable are in docs/share.md ("Replaying a public trace").

    PYTHONPATH=src python benchmarks/share_philly_sample.py [--nodes 231 80 64 48]
"""

from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np

from slowlink import units
from slowlink.share.scenario import check_share, load_share
from slowlink.share.sim import simulate_share
from slowlink.share.trace import TracedRun, philly_jobs_runs

DATA = Path(__file__).parents[1] / "tests" / "data" / "share"
SAMPLE = DATA / "philly_jobs_4gpu_pass.json"
SCENARIO = Path(__file__).parents[1] / "examples" / "share-philly-trace.yaml"
BUCKETS = (("2-4", 2, 4), ("5-8", 5, 8), (">8", 9, 10**9))  # the GPU buckets of the paper's Figures 2 and 3
MINUTES = (10.0, 100.0, 1000.0)  # points read off Figure 2 (docs/share.md)


def sample_lines(runs: list[TracedRun]) -> list[str]:
    """GPU mix, run-time CDF points by bucket (the notebook's run time: first start to last end) and the
    recorded queueing delay of the sample."""
    days = (max(r.attempts[-1][1] for r in runs) - min(r.submitted_s for r in runs)) / units.DAY
    mix = Counter(r.gpus for r in runs)
    lines = [f"sample: {len(runs)} jobs over {days:.1f} days; GPUs per job: "
             + ", ".join(f"{g}: {n} ({n / len(runs):.1%})" for g, n in sorted(mix.items()))]
    for name, lo, hi in BUCKETS:
        span_min = np.array([r.span_s / units.MINUTE for r in runs if lo <= r.gpus <= hi])
        cdf = ", ".join(f"<= {m:g} min {np.mean(span_min <= m):.1%}" for m in MINUTES)
        lines.append(f"  run time, {name} GPUs ({len(span_min)} jobs): median {np.median(span_min):.0f} min; {cdf}")
    queue = np.array([r.queue_s for r in runs])
    lines.append("  recorded queueing delay (submission to first start): "
                 + ", ".join(f"p{q} {np.percentile(queue, q):.0f} s" for q in (50, 95, 99))
                 + f", mean {queue.mean():.0f} s")
    return lines


def replay_lines(nodes: list[int]) -> list[str]:
    """The sample replayed at its recorded times on ``nodes`` 8-GPU servers, per policy."""
    spec, jobs, _ = load_share(SCENARIO)
    lines = []
    for n in nodes:
        s = replace(spec, nodes=n)
        shape = check_share(s, jobs, str(SCENARIO))
        for p in simulate_share(s, jobs, shape).policies:
            lines.append(f"replay on {n} x 8 = {n * 8} GPUs, {p.name}: utilisation {p.utilisation:.1%}, queue "
                         f"p50 {p.p50_queue_s:.0f} s, p95 {p.p95_queue_s:.0f} s, mean {p.mean_queue_s:.0f} s, "
                         f"finished {p.finished}/{p.jobs}, deadlocks {len(p.deadlocks)}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[231, 80, 64, 48],
                        help="8-GPU servers to replay on (231: Philly's, from its cluster_machine_list)")
    args = parser.parse_args()
    for line in sample_lines(philly_jobs_runs(SAMPLE)) + replay_lines(args.nodes):
        print(line)


if __name__ == "__main__":
    main()
