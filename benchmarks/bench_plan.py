"""Speed of the step model: a repeated plan (< 1 ms, issue 19: a design search calls it 10^4-10^6 times) of
the default example and of a 16,384-GPU Llama-3-405B, a cold 131,072-GPU plan (< 1 s: every group and
placement computation linear in the ranks), a 10-size scale (< 1 s), and the advice re-runs (reported, no
goal). Exits 1 when a goal is missed."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from slowlink.scale import scale
from slowlink.spec.cluster import Cluster, cluster_from_mapping, load_cluster
from slowlink.spec.workload import Workload, load_workload, workload_from_mapping
from slowlink.workload.advice import advise
from slowlink.workload.step import plan

PLAN_GOAL_S = 0.001  # per repeated plan (issue 19)
HUGE_GOAL_S = 1.0  # a cold 131,072-GPU plan (issue 19)
SCALE_GOAL_S = 1.0
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def h100_cluster(nodes: int) -> Cluster:
    """H100 nodes, 8 x 400G RoCE NICs each, on a 3-tier fat tree with 7:1 at the top (3,072-GPU pods)."""
    return cluster_from_mapping({
        "name": f"h100-{nodes * 8}", "nodes": nodes, "gpus_per_node": 8, "gpu": "h100-sxm",
        "scale_up": {"link": "nvlink4", "domain_gpus": 8},
        "nics": {"compute": {"per_node": 8, "speed_gbit_s": 400}},
        "fabric": {"transport": "roce", "topology": "fat-tree", "tiers": 3, "oversubscription": [1, 1, 7],
                   "pod_gpus": 3072}})


def llama3_405b(dp: int) -> Workload:
    """Llama 3 405B as in Dubey et al. 2024, Table 4 row 2 (TP 8, PP 16, 8k tokens), at ``dp`` replicas."""
    return workload_from_mapping({
        "model": {"preset": "llama3-405b"},
        "training": {"global_batch": 16 * dp, "micro_batch": 1, "precision": "bf16", "recompute": "selective"},
        "parallel": {"tp": 8, "pp": 16, "dp": dp, "vp": 2, "zero": 2,
                     "first_stage_layers": 7, "last_stage_layers": 7}})


def per_plan_s(w: Workload, cluster: Cluster, n: int) -> float:
    """Mean seconds of ``n`` repeated plans (after a first, cold one)."""
    plan(w, cluster, check_memory=False)
    t0 = time.perf_counter()
    for _ in range(n):
        plan(w, cluster, check_memory=False)
    return (time.perf_counter() - t0) / n


def main() -> int:
    ref, w_ref = load_cluster(EXAMPLES / "ref-64gpu.yaml"), load_workload(EXAMPLES / "llama3-8b.yaml")
    t0 = time.perf_counter()
    plan(w_ref, ref)
    cold_ref = time.perf_counter() - t0
    dt_ref = per_plan_s(w_ref, ref, 200)
    print(f"llama3-8b on ref-64gpu (the example): {dt_ref * 1e3:.3f} ms per plan, {cold_ref * 1e3:.2f} ms cold "
          f"(goal < {PLAN_GOAL_S * 1e3:.0f} ms)")
    cluster = h100_cluster(2048)
    w = llama3_405b(128)  # the held-out case llama3-405b-16k
    t0 = time.perf_counter()
    r = plan(w, cluster, check_memory=False)  # cold call: builds the placement cache
    cold = time.perf_counter() - t0
    n = 20
    t0 = time.perf_counter()
    for _ in range(n):
        r = plan(w, cluster, check_memory=False)
    dt = (time.perf_counter() - t0) / n
    print(f"llama3-405b on 16384 GPUs: {dt * 1e3:.3f} ms per plan, {cold * 1e3:.2f} ms cold (first) call "
          f"(goal < {PLAN_GOAL_S * 1e3:.0f} ms); step {r.step_time_s:.2f} s, MFU {r.mfu:.1%}")
    huge, w_huge = h100_cluster(16384), llama3_405b(1024)
    t0 = time.perf_counter()
    r_huge = plan(w_huge, huge, check_memory=False)  # cold: groups, placement and crossings of 131,072 ranks
    cold_huge = time.perf_counter() - t0
    print(f"llama3-405b on 131072 GPUs: {cold_huge * 1e3:.0f} ms cold (goal < {HUGE_GOAL_S:.0f} s), "
          f"{per_plan_s(w_huge, huge, 20) * 1e3:.3f} ms per repeated plan; step {r_huge.step_time_s:.2f} s, "
          f"MFU {r_huge.mfu:.1%}")
    t0 = time.perf_counter()
    adv = advise(w, cluster, r, check_memory=False)
    print(f"advice re-runs: {(time.perf_counter() - t0) * 1e3:.1f} ms for {len(adv)} kept piece(s) (no goal)")
    w8 = workload_from_mapping({
        "model": {"preset": "llama3-8b"},
        "training": {"global_batch": 2048, "micro_batch": 1, "precision": "bf16", "recompute": "selective"},
        "parallel": {"tp": 8, "pp": 1, "dp": 2048}})
    sizes = [16, 32, 64, 128, 192, 256, 512, 1024, 1536, 2048]
    t0 = time.perf_counter()
    pts = scale(w8, cluster, sizes, "per-gpu-batch")
    dts = time.perf_counter() - t0
    print(f"10-size scale (llama3-8b, 16..2048 nodes): {dts * 1e3:.1f} ms (goal < {SCALE_GOAL_S:.0f} s); "
          f"efficiency at 2048 nodes {pts.points[-1].efficiency:.1%}")
    ok = dt_ref < PLAN_GOAL_S and dt < PLAN_GOAL_S and cold_huge < HUGE_GOAL_S and dts < SCALE_GOAL_S
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
