"""Flow-simulator speed and the issue's done-when measurements; exits 1 when a goal is missed.

Run: PYTHONPATH=src python benchmarks/bench_sim.py [MAX_GPUS]
Goals: 1 GiB ring all_reduce over 1,024 GPUs (2-tier fat tree, 8 rails) < 2 s; one training step of a
16,384-GPU job (Llama-3-405B, tp 8, pp 16, dp 128, 8 x 400G rails) through ``flow_cost`` < 30 s.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from slowlink import units
from slowlink.sim.collectives import simulate_collective
from slowlink.sim.engine import Flow, simulate
from slowlink.sim.step import flow_cost
from slowlink.spec.cluster import Cluster, cluster_from_mapping
from slowlink.spec.workload import workload_from_mapping
from slowlink.topology.build import build
from slowlink.workload.step import plan

RING_GOAL_S, STEP_GOAL_S = 2.0, 30.0


def _cluster(nodes: int, gpn: int = 8, nics: int = 8, **fabric: Any) -> Cluster:
    return cluster_from_mapping({
        "name": "b", "nodes": nodes, "gpus_per_node": gpn, "gpu": "h100-sxm",
        "scale_up": {"link": "nvlink4", "domain_gpus": gpn},
        "nics": {"compute": {"per_node": nics, "speed_gbit_s": 400}},
        "fabric": {"transport": "infiniband", "topology": "rail-optimized", **{"tiers": 2, **fabric}},
    })


def ring_table(max_gpus: int) -> float:
    """1 GiB ring all_reduce, 8 GPUs and 8 rails per node; returns the 1,024-GPU wall time."""
    print(f"{'gpus':>6} {'flows':>7} {'sim_s':>8} {'time_ms':>9} {'busbw_GB/s':>10}")
    at_1024, n = 0.0, 8
    while n <= max_gpus:
        # a 2-tier rail fabric of radix-64 switches holds 256 nodes (64 leaves, topology/shape.py); then 3 tiers
        c = _cluster(n // 8, tiers=2 if n // 8 <= 256 else 3)
        t0 = time.perf_counter()
        pred, res = simulate_collective(c, "all_reduce", units.GiB, topo=build(c), algorithm="ring")
        dt = time.perf_counter() - t0
        at_1024 = dt if n == 1024 else at_1024
        print(f"{n:>6} {res.finish_s.size:>7} {dt:>8.3f} {pred.time_s * 1e3:>9.2f} "
              f"{pred.busbw_bytes_s / 1e9:>10.1f}")
        n *= 2
    return at_1024


def training_step(nodes: int = 2048) -> float:
    """One Llama-3-405B step (tp 8, pp 16, dp nodes*8/128, vp 2, Dubey et al. 2024 Table 4) planned by the
    step model with every collective simulated at flow fidelity (``plan(..., cost=flow_cost(c))``)."""
    c = _cluster(nodes, tiers=3)
    # global batch = nodes: 16 micro-batches per pipeline at every size, as in the 16k-GPU run
    w = workload_from_mapping({
        "model": {"preset": "llama3-405b"},
        "training": {"global_batch": nodes, "micro_batch": 1, "precision": "bf16",
                     "recompute": "selective"},
        "parallel": {"tp": 8, "pp": 16, "dp": nodes * 8 // 128, "vp": 2, "zero": 2,
                     "first_stage_layers": 7, "last_stage_layers": 7}})
    t0 = time.perf_counter()
    flow = plan(w, c, cost=flow_cost(c), check_memory=False)
    dt = time.perf_counter() - t0
    ana = plan(w, c, check_memory=False)
    print(f"{nodes * 8:>6} {dt:>10.2f}   (step {flow.step_time_s:.2f} s flow vs {ana.step_time_s:.2f} s "
          f"analytical; exposed comm {sum(flow.comm_s.values()):.3f} vs {sum(ana.comm_s.values()):.3f} s)")
    return dt


def oversubscription() -> None:
    """(a) 2-tier fat tree, 8 hosts on 2 leaves of 4, 4 spines: 4:1 vs 1:1."""
    print(f"{'case':<28} {'1:1_ms':>8} {'4:1_ms':>8} {'ratio':>6}")
    for name, op, ranks in (("all_to_all, all leaves", "all_to_all", None),
                            ("all_to_all, one leaf", "all_to_all", [0, 1, 2, 3]),
                            ("ring all_reduce, all leaves", "all_reduce", None)):
        t = []
        for o in (1, 4):
            c = _cluster(8, gpn=1, nics=1, topology="fat-tree", oversubscription=o, routing="adaptive",
                         switch_radix={1: 8, 4: 5}[o])  # 4 hosts per leaf at either ratio
            algorithm = "ring" if op == "all_reduce" else None  # NCCL_ALGO names no all_to_all algorithm
            t.append(simulate_collective(c, op, units.GiB, ranks, build(c), algorithm=algorithm)[0].time_s)
        print(f"{name:<28} {t[0] * 1e3:>8.2f} {t[1] * 1e3:>8.2f} {t[1] / t[0]:>6.2f}")


def ecmp_loss() -> None:
    """(b) 16 hosts, 4 leaves of 4, 4 spines: leaf i's hosts each send 1 GiB to leaf i+1 as F flows."""
    print(f"{'flows/host':>10} {'ecmp_ms':>8} {'spray_ms':>8} {'ecmp_loss':>9}")
    for per_host in (1, 2, 4, 8, 16):
        t = {}
        for routing in ("ecmp", "adaptive"):
            c = _cluster(16, gpn=1, nics=1, topology="fat-tree", routing=routing, ecmp_seed=1, switch_radix=8)
            topo = build(c)
            flows = [Flow(p, units.GiB / per_host * w)
                     for n in range(16) for k in range(per_host)
                     for w, p in topo.gpu_paths(n, (n + 4) % 16, 0, k)]
            t[routing] = simulate(topo.capacity_bytes_s, topo.latency_s, flows).makespan_s
        print(f"{per_host:>10} {t['ecmp'] * 1e3:>8.2f} {t['adaptive'] * 1e3:>8.2f} "
              f"{t['ecmp'] / t['adaptive'] - 1:>9.1%}")


def main(max_gpus: int = 16384) -> int:
    ring_1024 = ring_table(max_gpus)
    print(f"{'gpus':>6} {'step_sim_s':>10}")
    step_s, nodes = 0.0, 16
    while nodes * 8 <= max_gpus:
        step_s = training_step(nodes)
        nodes *= 2
    step_s = step_s if max_gpus >= 16384 else 0.0
    oversubscription()
    ecmp_loss()
    missed = []
    if max_gpus >= 1024 and ring_1024 >= RING_GOAL_S:
        missed.append(f"1,024-GPU ring all_reduce took {ring_1024:.2f} s (goal < {RING_GOAL_S} s)")
    if step_s >= STEP_GOAL_S:
        missed.append(f"16,384-GPU training step took {step_s:.2f} s (goal < {STEP_GOAL_S} s)")
    for m in missed:
        print(f"GOAL MISSED: {m}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 16384))
