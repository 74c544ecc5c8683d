"""The straggler issue's done-when numbers (issue 18), printed:

1. one 400G NIC at 50% in a 64-node job (Llama 3 70B) and in an all_to_all-heavy MoE job (Mixtral 8x7B):
   step time healthy and degraded, the dimension that pays, analytical and flow side by side;
2. expected step against GPU count (8 to 16,384) at 1%, 2% and 5% per-rank jitter, closed form against a
   seeded Monte Carlo of the same step (normal and lognormal), with the largest difference;
3. with ``--emulated`` (root): `find-slow` on the emulated 6-node cluster, one link at half rate and one
   node +5 ms, the suspects, the collective measured and predicted, and the wall time.

Exits 1 when the models disagree by more than 2 points, the closed form misses the Monte Carlo by 2% or
more, or (with --emulated) the probes do not name exactly the two broken parts within two minutes.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from slowlink.spec.cluster import load_cluster
from slowlink.spec.workload import load_workload
from slowlink.straggler.degraded import degraded_cost
from slowlink.straggler.sweep import jitter_sweep, sync_points
from slowlink.workload.step import check_plan, fit_dp, plan

EX = Path(__file__).resolve().parents[1] / "examples"
AGREE_POINTS = 0.02
JITTER_GOAL = 0.02


def degraded_part() -> bool:
    cluster = load_cluster(EX / "straggler-64node.yaml")
    ok = True
    for name in ("straggler-llama3-70b.yaml", "straggler-mixtral-8x7b.yaml"):
        w = load_workload(EX / name)
        costs = {f: degraded_cost(w, cluster, f) for f in ("analytical", "flow")}
        for f, c in costs.items():
            deltas = ", ".join(f"{k} {v * 1e3:+.1f} ms" for k, v in c.exposed_delta_s.items() if abs(v) > 1e-6)
            print(f"{w.name:18s} {f:10s} healthy {c.healthy.step_time_s:.4f} s  degraded "
                  f"{c.degraded.step_time_s:.4f} s  {c.slowdown:+.2%}  pays: {c.pays}  (exposed: {deltas})")
        gap = abs(costs["analytical"].slowdown - costs["flow"].slowdown)
        ok &= gap < AGREE_POINTS
    return ok


def jitter_part() -> bool:
    cluster = load_cluster(EX / "straggler-64node.yaml")
    w = load_workload(EX / "straggler-llama3-70b.yaml")
    result = plan(w, cluster)
    syncs = sync_points(w, check_plan(fit_dp(w, cluster), cluster))
    worst = 0.0
    for dist in ("normal", "lognormal"):
        t0 = time.perf_counter()
        pts = jitter_sweep(result, syncs, network_cv=0.0, distribution=dist, trials=32, seed=1)
        print(f"\n{dist}, {syncs} synchronisations, mean step {result.step_time_s:.4f} s "
              f"({time.perf_counter() - t0:.1f} s)")
        print(f"{'GPUs':>7s} {'CV':>4s} {'closed form s':>14s} {'Monte Carlo s':>14s} {'CF vs MC':>9s} {'loss':>8s}")
        for p in pts:
            print(f"{p.gpus:7d} {p.compute_cv:4.0%} {p.closed_form_s:14.4f} {p.monte_carlo_s:14.4f} "
                  f"{p.error:+9.3%} {p.loss:+8.2%}")
            worst = max(worst, abs(p.error))
    print(f"largest |closed form - Monte Carlo|: {worst:.3%} (goal < {JITTER_GOAL:.0%})")
    return worst < JITTER_GOAL


def emulated_part() -> bool:
    from slowlink.probe.slow import find_slow_emulated

    r = find_slow_emulated(load_cluster(EX / "straggler-emulate.yaml"))
    for s in r.suspects:
        print(f"suspect {s.kind} {s.id}: {s.evidence}")
    print(f"{r.op} {r.size_bytes / 2**20:g} MiB measured {r.measured_healthy_s * 1e3:.1f} -> "
          f"{r.measured_degraded_s * 1e3:.1f} ms ({r.measured_slowdown:+.0%})")
    for f, (h, d) in r.predicted_s.items():
        print(f"  predicted {f}: {h * 1e3:.1f} -> {d * 1e3:.1f} ms ({d / h - 1:+.0%})")
    print(f"whole run {r.wall_s:.1f} s")
    return {(s.kind, s.id) for s in r.suspects} == {("link", "n1"), ("node", "n4")} and r.wall_s < 120


def main(argv: list[str]) -> int:
    ok = degraded_part()
    ok &= jitter_part()
    if "--emulated" in argv:
        ok &= emulated_part()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
