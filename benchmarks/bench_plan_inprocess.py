"""In-process speed of the step model over many *different* configurations, as the design search calls it
(issue 19: < 1 ms per configuration after the first; a search calls it 10^4-10^6 times).

The configurations are those of ``examples/search-llama3-70b.yaml`` (Llama 3 70B; tp, pp, vp, micro-batch,
ZeRO stage and recomputation: 320 layouts) on one hardware design per cluster size of that space (64 to 1,024
H100 nodes), each evaluated once, in order, by the search's own per-configuration step
(:func:`slowlink.search.evaluate._point`: the layout's divisibility rules, then ``plan`` with the design's
memoised collective prices, then its cost per token). Reports the median, p90 and max per configuration
after the first (which loads the model), for the feasible ones split into those placing a (tp, pp) layout on
the cluster for the first time and those reusing one, and for the ones a rule rejects. Exits 1 when the
median per configuration is above the goal. Run as ``python benchmarks/bench_plan_inprocess.py``.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from slowlink.cost.design import build_design
from slowlink.cost.model import cluster_cost
from slowlink.search.evaluate import _point, memo_cost
from slowlink.search.space import load_space

GOAL_S = 0.001  # median per configuration after the first (issue 19)
SPACE = Path(__file__).resolve().parents[1] / "examples" / "search-llama3-70b.yaml"


def stats(xs: list[float]) -> str:
    if not xs:
        return "none"
    xs = sorted(xs)
    return (f"median {statistics.median(xs) * 1e3:.3f} ms, p90 {xs[int(0.9 * (len(xs) - 1))] * 1e3:.3f} ms, "
            f"max {xs[-1] * 1e3:.2f} ms")


def main() -> int:
    space = load_space(SPACE)
    designs, sizes = [], set()
    for h, d in enumerate(space.hardware):  # the first design of each cluster size
        if d.nodes not in sizes:
            sizes.add(d.nodes)
            designs.append(h)
    n = len(space.layouts)
    new, reused, rejected, first = [], [], [], None
    for h in designs:
        cluster = build_design(space.hardware[h], space.prices)
        cost, comm = cluster_cost(cluster, space.prices), memo_cost(cluster)
        placed: set[tuple[int, int]] = set()
        for i in range(n):
            lay = space.layout(i)
            t0 = time.perf_counter()
            point = _point(space, h * n + i, cluster, cost, comm, lay)
            dt = time.perf_counter() - t0
            if first is None:
                first = dt
                continue
            if point.rule:
                rejected.append(dt)
            elif (lay.tp, lay.pp) in placed:
                reused.append(dt)
            else:
                placed.add((lay.tp, lay.pp))
                new.append(dt)
    every = new + reused + rejected
    med = statistics.median(every)
    print(f"{len(designs)} designs ({', '.join(str(space.hardware[h].nodes * 8) for h in designs)} GPUs) x {n} "
          f"layouts of {SPACE.name}; first configuration (cold) {(first or 0) * 1e3:.2f} ms")
    print(f"{len(every)} configurations after the first: {stats(every)} (goal: median < {GOAL_S * 1e3:.0f} ms) "
          f"{'ok' if med < GOAL_S else 'MISSED'}")
    print(f"  {len(new + reused)} feasible: {stats(new + reused)}")
    print(f"    {len(new)} placing their (tp, pp) layout on the cluster for the first time: {stats(new)}")
    print(f"    {len(reused)} on a layout already placed (vp, micro-batch, ZeRO, recompute): {stats(reused)}")
    print(f"  {len(rejected)} rejected by a rule (divisibility, memory): {stats(rejected)}")
    return 0 if med < GOAL_S else 1


if __name__ == "__main__":
    sys.exit(main())
