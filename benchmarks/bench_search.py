"""Wall time of a design search (issue 16): ``examples/search-llama3-70b.yaml`` (51,200 configurations) must
finish in under 5 minutes on a 2-core machine, on a Dask ``LocalCluster`` of ``--workers`` processes
(``0``: in this process); cluster start-up is included. Reports configurations per second, the feasible
count and the cheapest design; exits 1 when the goal is missed or the Dask result differs from the
in-process one (``--check``). ``--configs N``: the first designs of the space worth N configurations (past its
51,200, a second NIC speed, 200G, doubles the hardware axes; past 102,400, more node counts, NIC counts, ratios,
cp and micro-batches make 1,382,400); ``--scheduler ADDRESS``: a running
``dask.distributed`` scheduler instead of a local cluster. Run as
``python benchmarks/bench_search.py [--workers N] [--configs N] [--scheduler ADDRESS] [--check]``."""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

from slowlink.fileio import read_mapping
from slowlink.report.search import search_json
from slowlink.search.run import evaluate_space, summarize
from slowlink.search.space import Space, load_space, space_from_mapping

SPACE = Path(__file__).resolve().parents[1] / "examples" / "search-llama3-70b.yaml"
GOAL_S = 300.0
MIN_CONFIGS = 10_000


def sized_space(configs: int | None) -> Space:
    """The example's space, or its first designs worth ``configs`` configurations (module docstring)."""
    space = load_space(SPACE)
    if configs is None:
        return space
    if configs > space.size:
        raw = read_mapping(SPACE)
        raw["hardware"]["nic_speed_gbit_s"] = [400, 200]
        if configs > 2 * space.size:  # towards 10^6: more sizes, NIC counts and ratios, cp and micro-batches
            raw["hardware"]["nodes"] = [64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536]
            raw["hardware"]["nics_per_node"] = [4, 8, 2]
            raw["hardware"]["oversubscription"] = [1, 2, 4]
            raw["parallel"]["cp"] = [1, 2]
            raw["parallel"]["micro_batch"] = [1, 2, 4]
        space = space_from_mapping(raw, str(SPACE), SPACE.parent)
    designs = -(-configs // len(space.layouts))
    return replace(space, hardware=space.hardware[:designs])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--configs", type=int, default=None, help="about this many configurations (default: all)")
    ap.add_argument("--scheduler", default=None, help="address of a running dask.distributed scheduler")
    ap.add_argument("--check", action="store_true", help="also run in-process and compare the results")
    args = ap.parse_args()
    space = sized_space(args.configs)
    t0 = time.perf_counter()
    result = summarize(space, evaluate_space(space, workers=args.workers, scheduler=args.scheduler))
    wall = time.perf_counter() - t0
    js = search_json(result)
    best = js["best"]
    where = args.scheduler or f"{args.workers} Dask worker(s)"
    print(f"{space.size:,} configurations on {where}: {wall:.1f} s "
          f"({space.size / wall:,.0f} configurations/s), {js['feasible']:,} feasible, "
          f"{len(js['pareto'])} on the Pareto front")
    print(f"cheapest: {best['design']} tp {best['tp']} pp {best['pp']}: {best['usd_per_million_tokens']:.3f} "
          "USD/M tokens")
    ok = space.size >= MIN_CONFIGS and wall < GOAL_S * space.size / 51_200
    if args.check:
        t1 = time.perf_counter()
        same = search_json(summarize(space, evaluate_space(space))) == js
        print(f"in-process: {time.perf_counter() - t1:.1f} s, identical result: {same}")
        ok = ok and same
    print("goal (>= 10,000 configurations in < 300 s):", "met" if ok else "MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
