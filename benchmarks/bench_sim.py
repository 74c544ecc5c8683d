"""Flow-simulator speed: 1 GiB ring all_reduce over N GPUs (8 per node, 8 rails, 2-tier fat tree).

Run: PYTHONPATH=src python benchmarks/bench_sim.py [MAX_GPUS]   (prints a table; goal: 1,024 GPUs < 2 s)
"""

from __future__ import annotations

import sys
import time

from slowlink import units
from slowlink.sim.collectives import simulate_collective
from slowlink.spec.cluster import cluster_from_mapping
from slowlink.topology.fabric import build


def main(max_gpus: int = 16384) -> None:
    print(f"{'gpus':>6} {'flows':>7} {'sim_s':>8} {'time_ms':>9} {'busbw_GB/s':>10}")
    n = 8
    while n <= max_gpus:
        c = cluster_from_mapping({
            "name": "b", "nodes": n // 8, "gpus_per_node": 8, "gpu": "h100-sxm",
            "scale_up": {"link": "nvlink4", "domain_gpus": 8},
            "nics": {"compute": {"per_node": 8, "speed_gbit_s": 400}},
            "fabric": {"transport": "infiniband", "topology": "rail-optimized", "tiers": 2},
        })
        t0 = time.perf_counter()
        pred, res = simulate_collective(c, "all_reduce", units.GiB, topo=build(c))
        dt = time.perf_counter() - t0
        print(f"{n:>6} {res.finish_s.size:>7} {dt:>8.3f} {pred.time_s * 1e3:>9.2f} "
              f"{pred.busbw_bytes_s / 1e9:>10.1f}")
        n *= 2


def ecmp_loss() -> None:
    """Leaf i's 4 hosts each send 1 GiB to leaf i+1 as F parallel flows: ECMP per-flow hash vs spraying."""
    from slowlink.sim.engine import Flow, simulate

    print(f"{'flows/host':>10} {'ecmp_ms':>8} {'spray_ms':>8} {'ecmp_loss':>9}")
    for per_host in (1, 2, 4, 8, 16):
        t = {}
        for routing in ("ecmp", "adaptive"):
            c = cluster_from_mapping({
                "name": "e", "nodes": 16, "gpus_per_node": 1, "gpu": "h100-sxm",
                "scale_up": {"link": "nvlink4", "domain_gpus": 1},
                "nics": {"compute": {"per_node": 1, "speed_gbit_s": 400}},
                "fabric": {"transport": "infiniband", "tiers": 2, "routing": routing, "ecmp_seed": 1},
            })
            topo = build(c, nics_per_leaf=4, spines=4)
            flows = [Flow(p, units.GiB / per_host * w)
                     for n in range(16) for k in range(per_host)
                     for w, p in topo.gpu_paths(n, (n + 4) % 16, 0, (k,))]
            t[routing] = simulate(topo.capacity_bytes_s, topo.latency_s, flows).makespan_s
        print(f"{per_host:>10} {t['ecmp'] * 1e3:>8.2f} {t['adaptive'] * 1e3:>8.2f} "
              f"{1 - t['adaptive'] / t['ecmp']:>9.1%}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 16384)
    ecmp_loss()
