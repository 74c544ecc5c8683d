"""Cost of a plan as a function of the GPU count: a flow-level plan of Llama 3 405B on Llama 3's own fabric
(RoCE, ECMP, a 3-tier fat tree with 1:7 above 3,072-GPU pods; Dubey et al. 2024, Sec. 3.3) and the cold
(first) analytical plan on a new cluster. Goals: flow plan at 131,072 GPUs < 15 s, cold analytical plan at
131,072 GPUs < 20 ms, on a 2-core machine. Each time is the best of ``--repeat`` runs, each on a fresh
cluster value (nothing cached from the run before). Exits 1 when a goal is missed.

Run: PYTHONPATH=src python benchmarks/bench_flow_plan.py [--flow 16384,65536,131072] [--cold 1024,16384,131072]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace

from bench_plan import llama3_405b

from slowlink.sim.step import flow_cost
from slowlink.spec.cluster import Cluster, cluster_from_mapping
from slowlink.spec.workload import Workload, workload_from_mapping
from slowlink.workload.step import plan

TOPOLOGY = "rail-optimized"  # examples/fat3-llama3-style.yaml; --topology fat-tree: bench_plan.py's cluster
FLOW_GOAL_S = 15.0  # 131,072 GPUs
COLD_GOAL_S = 0.020  # 131,072 GPUs


def llama3_fabric(nodes: int, topology: str = TOPOLOGY, degraded: bool = False) -> Cluster:
    """``examples/fat3-llama3-style.yaml`` at ``nodes`` H100 nodes: 8 x 400G RoCE rails, ECMP, 3 tiers, full
    bisection inside 3,072-GPU pods and 1:7 above them (Dubey et al. 2024, Sec. 3.3.1). ``degraded``: node 5's
    first NIC at half rate (every group with a member there reads its NICs)."""
    return cluster_from_mapping({**({"degraded": [{"node": 5, "nic": 0, "rate": 0.5}]} if degraded else {}),
        "name": f"llama3-fabric-{nodes * 8}", "nodes": nodes, "gpus_per_node": 8, "gpu": "h100-sxm",
        "scale_up": {"link": "nvlink4", "domain_gpus": 8},
        "nics": {"compute": {"per_node": 8, "speed_gbit_s": 400}},
        "fabric": {"transport": "roce", "topology": topology, "tiers": 3, "oversubscription": [1, 1, 7],
                   "pod_gpus": 3072}})


def nvl72_racks(gpus: int, topology: str = TOPOLOGY) -> Cluster:
    """GB200 NVL72 racks (``examples/rail-nvl72.yaml`` at ``gpus / 72`` racks): 18 trays of 4 GPUs in one
    72-GPU NVLink domain, 4 x 400G InfiniBand per tray, 3 tiers. A domain spans nodes, so its rings and trees
    leave by every member's NICs (``communicator.domain_channels``)."""
    return cluster_from_mapping({
        "name": f"nvl72-{gpus}", "nodes": gpus // 4, "gpus_per_node": 4, "gpu": "gb200",
        "scale_up": {"link": "nvlink5", "domain_gpus": 72}, "nics": {"compute": {"per_node": 4, "speed_gbit_s": 400}},
        "fabric": {"transport": "infiniband", "topology": topology, "tiers": 3}})


def dragonfly(gpus: int) -> Cluster:
    """H100 nodes (8 x 400G) on a dragonfly of 64 groups of 64-port switches (Kim et al. 2008 sizing from the
    radix, ``examples/dragonfly-16g.yaml`` grown): its local links' loads are fractions, so groups are placed
    written out."""
    return cluster_from_mapping({
        "name": f"dragonfly-{gpus}", "nodes": gpus // 8, "gpus_per_node": 8, "gpu": "h100-sxm",
        "scale_up": {"link": "nvlink4", "domain_gpus": 8}, "nics": {"compute": {"per_node": 8, "speed_gbit_s": 400}},
        "fabric": {"transport": "infiniband", "topology": "dragonfly", "switch_radix": 64,
                   "dragonfly": {"groups": 64}}})


def mixtral_moe(gpus: int) -> Workload:
    """Mixtral 8x7B with TP 2 (sequence parallel) and EP 8 over DP: its all_to_all groups are placed written out."""
    return workload_from_mapping({
        "model": {"preset": "mixtral-8x7b"}, "training": {"global_batch": gpus // 2, "micro_batch": 1,
                                                           "precision": "bf16"},
        "parallel": {"tp": 2, "pp": 1, "dp": gpus // 2, "ep": 8, "zero": 1, "sequence_parallel": True}})


def fsdp_405b(gpus: int, pp: int = 1, order: str = "tp-cp-dp-pp") -> Workload:
    """Llama 3 405B without tensor parallelism: FSDP (ZeRO 3) over every GPU, or over ``gpus / pp`` with ``pp``
    pipeline stages (126 layers: 7 on the first and last, as Table 4's layout); DP is then the fastest dimension
    (with ``order`` as given), so its groups are not the TP-fastest layout's."""
    return workload_from_mapping({
        "model": {"preset": "llama3-405b"},
        "training": {"global_batch": gpus // pp, "micro_batch": 1, "precision": "bf16", "recompute": "full"},
        "parallel": {"tp": 1, "pp": pp, "dp": gpus // pp, "zero": 3, "order": order,
                     **({"first_stage_layers": 7, "last_stage_layers": 7} if pp == 16 else {})}})


LAYOUTS = {  # name -> the workload at a GPU count
    "llama3": lambda gpus: llama3_405b(gpus // 128),  # TP 8 fastest (Dubey et al. 2024, Table 4)
    "fsdp": fsdp_405b,  # tp 1: DP over every rank
    "fsdp-pp": lambda gpus: fsdp_405b(gpus, pp=16),  # tp 1, DP fastest, 16 stages
    "pp-first": lambda gpus: fsdp_405b(gpus, pp=16, order="pp-tp-cp-dp"),  # the stages on neighbouring ranks
    "moe": mixtral_moe,  # all_to_all over EP 8
}


def cold_plan_s(gpus: int, repeat: int, topology: str, layout: str = "llama3", racks: bool = False,
                degraded: bool = False, groups: bool = False) -> tuple[float, float, float]:
    """Wall time of the first analytical plan of a layout on a new cluster (its rank groups built too), the best
    of ``repeat`` first plans on new cluster values (the groups known), and the step time. ``racks``: on GB200
    NVL72 racks (:func:`nvl72_racks`) instead of Llama 3's fabric; ``groups``: on a dragonfly (:func:`dragonfly`)."""
    times, step = [], 0.0
    for i in range(repeat):
        made = nvl72_racks(gpus, topology) if racks else dragonfly(gpus) if groups \
            else llama3_fabric(gpus // 8, topology, degraded)
        c = replace(made, name=f"cold-{gpus}-{i}-{time.perf_counter_ns()}")
        w = LAYOUTS[layout](gpus)
        t0 = time.perf_counter()
        r = plan(w, c, check_memory=False)
        times.append(time.perf_counter() - t0)
        step = float(r.step_time_s)
    return times[0], min(times[1:] or times), step


def flow_plan_s(gpus: int, repeat: int, topology: str) -> tuple[float, float, float]:
    """Best wall and CPU time of a flow-level plan (graph built inside), and the step time."""
    best, cpu, step = float("inf"), float("inf"), 0.0
    for _ in range(repeat):
        c, w = llama3_fabric(gpus // 8, topology), llama3_405b(gpus // 128)
        t0, c0 = time.perf_counter(), time.process_time()
        r = plan(w, c, cost=flow_cost(c), check_memory=False)
        best, cpu = min(best, time.perf_counter() - t0), min(cpu, time.process_time() - c0)
        step = float(r.step_time_s)
    return best, cpu, step


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--flow", default="16384,65536,131072", help="GPU counts of the flow plans ('' for none)")
    ap.add_argument("--cold", default="1024,16384,131072", help="GPU counts of the cold plans ('' for none)")
    ap.add_argument("--topology", default=TOPOLOGY, choices=("rail-optimized", "fat-tree"))
    ap.add_argument("--nvl72", default="", help="GPU counts (multiples of 72) of cold plans on GB200 NVL72 racks, "
                    "reported without a goal ('' for none; e.g. 9216,147456)")
    ap.add_argument("--dragonfly", default="", help="GPU counts of cold plans on a 64-group dragonfly, reported "
                    "without a goal ('' for none; e.g. 16384,131072)")
    ap.add_argument("--degraded", action="store_true", help="the cold plans' cluster with one NIC at half rate")
    ap.add_argument("--layout", default="llama3", choices=sorted(LAYOUTS), help="the cold plans' layout")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--flow-repeat", type=int, default=1)
    args = ap.parse_args()
    plan(llama3_405b(1), llama3_fabric(16), check_memory=False)  # imports and the model's tables
    ok = True
    for g in [int(x) for x in args.cold.split(",") if x]:
        first, dt, step = cold_plan_s(g, args.repeat, args.topology, args.layout, degraded=args.degraded)
        miss = g >= 131072 and max(first, dt) >= COLD_GOAL_S
        ok = ok and not miss
        print(f"cold analytical plan {g:>7} GPUs: {first * 1e3:8.1f} ms first (groups built), {dt * 1e3:8.1f} ms "
              f"on a new cluster  step {step!r}{'  MISSED' if miss else ''}", flush=True)
    for g in [int(x) for x in args.nvl72.split(",") if x]:
        first, dt, step = cold_plan_s(g, args.repeat, args.topology, args.layout, racks=True)
        print(f"cold analytical plan {g:>7} GPUs on NVL72 racks: {first * 1e3:8.1f} ms first, {dt * 1e3:8.1f} ms on a "
              f"new cluster  step {step!r}", flush=True)
    for g in [int(x) for x in args.dragonfly.split(",") if x]:
        first, dt, step = cold_plan_s(g, args.repeat, args.topology, args.layout, groups=True)
        print(f"cold analytical plan {g:>7} GPUs on a dragonfly: {first * 1e3:8.1f} ms first, {dt * 1e3:8.1f} ms on a "
              f"new cluster  step {step!r}", flush=True)
    for g in [int(x) for x in args.flow.split(",") if x]:
        dt, cpu, step = flow_plan_s(g, args.flow_repeat, args.topology)
        miss = g >= 131072 and dt >= FLOW_GOAL_S
        ok = ok and not miss
        print(f"flow plan {g:>7} GPUs: {dt:8.2f} s wall, {cpu:8.2f} s CPU  step {step!r}"
              f"{'  MISSED' if miss else ''}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
