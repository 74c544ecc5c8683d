"""Speed of the collective model: one prediction at 100,000 ranks (< 10 ms) and a 30-size sweep (< 100 ms).

Run: PYTHONPATH=src python benchmarks/bench_collectives.py. Median of many repeats, time.perf_counter.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from slowlink import units
from slowlink.collectives import Group, predict
from slowlink.spec.cluster import cluster_from_mapping

BIG = cluster_from_mapping({
    "name": "100k", "nodes": 12500, "gpus_per_node": 8, "gpu": "h100-sxm",
    "scale_up": {"link": "nvlink4", "domain_gpus": 8},
    "nics": {"compute": {"per_node": 8, "speed_gbit_s": 400}},
    "fabric": {"transport": "infiniband", "tiers": 3, "oversubscription": [1, 1, 7], "pod_gpus": 3072},
})
GROUP = Group(ranks=100_000, ranks_per_node=8)
SIZES = [8 * 2.0**k for k in range(30)]


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) / units.MS


def main() -> None:
    one = median_ms(lambda: predict(BIG, "all_reduce", units.GiB, GROUP), 500)
    sweep = median_ms(lambda: [predict(BIG, "all_reduce", s, GROUP) for s in SIZES], 50)
    print(f"one all_reduce prediction at 100,000 ranks: {one:.3f} ms (target < 10 ms)")
    print(f"30-size sweep at 100,000 ranks:            {sweep:.3f} ms (target < 100 ms)")


if __name__ == "__main__":
    main()
