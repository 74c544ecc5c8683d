"""In-process speed of the step model over many *different* configurations, the way the design search calls
it (issue 19: < 1 ms per configuration after the first; the search calls it 10^4-10^6 times).

Each configuration is planned once, in order, through the call :func:`slowlink.search.evaluate._point` makes:
``plan(workload with parallel/training copied, cluster, memo_cost(cluster))``. The grid varies the cluster
size (8..512 H100 nodes), tp, pp, micro-batch and ZeRO stage of Llama 3 70B, so most calls place a layout
(groups, communicators) for the first time; infeasible ones (memory, divisibility) raise and are timed too.
Reports the median, p90 and max per feasible configuration (the first feasible one, cold, is left out), split into
layouts placed for the first time and layouts already placed (micro-batch, ZeRO), and the infeasible ones
apart. Exits 1 when the feasible median is above the goal.
Run as ``python benchmarks/bench_plan_inprocess.py``.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import replace
from itertools import product

from slowlink.errors import SlowlinkError
from slowlink.search.evaluate import memo_cost
from slowlink.spec.cluster import Cluster, cluster_from_mapping
from slowlink.workload.spec import Workload, workload_from_mapping
from slowlink.workload.step import plan

GOAL_S = 0.001  # median per configuration after the first (issue 19)
NODES = (8, 32, 128, 512)
TP, PP, MICRO, ZERO = (1, 2, 4, 8), (1, 2, 4, 8), (1, 2), (0, 1)


def h100_cluster(nodes: int) -> Cluster:
    """H100 nodes, 8 x 400G RoCE NICs each, on a 3-tier fat tree with 7:1 at the top (3,072-GPU pods)."""
    return cluster_from_mapping({
        "name": f"h100-{nodes * 8}", "nodes": nodes, "gpus_per_node": 8, "gpu": "h100-sxm",
        "scale_up": {"link": "nvlink4", "domain_gpus": 8},
        "nics": {"compute": {"per_node": 8, "speed_gbit_s": 400}},
        "fabric": {"transport": "roce", "topology": "fat-tree", "tiers": 3, "oversubscription": [1, 1, 7],
                   "pod_gpus": 3072}})


def llama3_70b() -> Workload:
    return workload_from_mapping({
        "model": {"preset": "llama3-70b"},
        "training": {"global_batch": 4096, "micro_batch": 1, "precision": "bf16", "recompute": "selective"},
        "parallel": {"tp": 8, "pp": 8, "dp": 1}})


def configurations(w: Workload) -> list[tuple[Cluster, Workload, bool]]:
    """(cluster, workload, first time this layout is seen) for every point of the grid."""
    out, seen = [], set()
    for nodes in NODES:
        c = h100_cluster(nodes)
        for tp, pp, mb, zero in product(TP, PP, MICRO, ZERO):
            dp = c.gpus // (tp * pp)
            par = w.parallel.model_copy(update={"tp": tp, "pp": pp, "dp": dp, "zero": zero})
            work = replace(w, parallel=par, training=w.training.model_copy(update={"micro_batch": mb}))
            out.append((c, work, (nodes, tp, pp) not in seen))
            seen.add((nodes, tp, pp))
    return out


def main() -> int:
    configs = configurations(llama3_70b())
    comms: dict[int, object] = {}
    times: dict[tuple[bool, bool], list[float]] = {(f, n): [] for f in (True, False) for n in (True, False)}
    warm = False  # the first feasible plan (and any infeasible one before it) loads the model: left out
    for c, w, new in configs:
        comm = comms.setdefault(id(c), memo_cost(c))
        t0 = time.perf_counter()
        try:
            plan(w, c, comm)  # type: ignore[arg-type]
            ok = True
        except SlowlinkError:
            ok = False
        dt = time.perf_counter() - t0
        if not warm:
            warm = ok
            if ok:
                print(f"first feasible configuration (cold): {dt * 1e3:.2f} ms")
            continue
        times[ok, new].append(dt)

    def stats(xs: list[float]) -> str:
        xs = sorted(xs)
        return (f"median {statistics.median(xs) * 1e3:.3f} ms, p90 {xs[int(0.9 * (len(xs) - 1))] * 1e3:.3f} ms, "
                f"max {xs[-1] * 1e3:.2f} ms")

    feasible = times[True, True] + times[True, False]
    med = statistics.median(feasible)
    print(f"{len(feasible)} feasible configurations after the first: {stats(feasible)} "
          f"(goal: median < {GOAL_S * 1e3:.0f} ms) {'ok' if med < GOAL_S else 'MISSED'}")
    print(f"  {len(times[True, True])} placing their layout for the first time: {stats(times[True, True])}")
    print(f"  {len(times[True, False])} on a layout already placed: {stats(times[True, False])}")
    infeasible = times[False, True] + times[False, False]
    print(f"{len(infeasible)} infeasible (memory, divisibility): {stats(infeasible)}")
    return 0 if med < GOAL_S else 1


if __name__ == "__main__":
    sys.exit(main())
