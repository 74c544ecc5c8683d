"""Speed of the step model: a 16,384-GPU Llama-3-405B plan (< 50 ms), a 10-size scale (< 1 s), and the
advice re-runs (reported, no goal). Exits 1 when a goal is missed."""

from __future__ import annotations

import sys
import time

from slowlink.spec.cluster import cluster_from_mapping
from slowlink.workload.advice import advise
from slowlink.workload.scale import scale
from slowlink.workload.spec import workload_from_mapping
from slowlink.workload.step import plan

PLAN_GOAL_S = 0.050
SCALE_GOAL_S = 1.0


def main() -> int:
    cluster = cluster_from_mapping({
        "name": "h100-16k", "nodes": 2048, "gpus_per_node": 8, "gpu": "h100-sxm",
        "scale_up": {"link": "nvlink4", "domain_gpus": 8},
        "nics": {"compute": {"per_node": 8, "speed_gbit_s": 400}},
        "fabric": {"transport": "roce", "topology": "fat-tree", "tiers": 3, "oversubscription": [1, 1, 7],
                   "pod_gpus": 3072}})
    # Llama 3 405B as in Dubey et al. 2024, Table 4 row 2 (the held-out case llama3-405b-16k).
    w = workload_from_mapping({
        "model": {"preset": "llama3-405b"},
        "training": {"global_batch": 2048, "micro_batch": 1, "precision": "bf16", "recompute": "selective"},
        "parallel": {"tp": 8, "pp": 16, "dp": 128, "vp": 2, "zero": 2,
                     "first_stage_layers": 7, "last_stage_layers": 7}})
    t0 = time.perf_counter()
    r = plan(w, cluster, check_memory=False)  # cold call: builds the placement cache
    cold = time.perf_counter() - t0
    n = 20
    t0 = time.perf_counter()
    for _ in range(n):
        r = plan(w, cluster, check_memory=False)
    dt = (time.perf_counter() - t0) / n
    print(f"llama3-405b on 16384 GPUs: {dt * 1e3:.2f} ms per plan, {cold * 1e3:.2f} ms cold (first) call "
          f"(goal < {PLAN_GOAL_S * 1e3:.0f} ms); step {r.step_time_s:.2f} s, MFU {r.mfu:.1%}")
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
          f"efficiency at 2048 nodes {pts[-1].efficiency:.1%}")
    ok = dt < PLAN_GOAL_S and dts < SCALE_GOAL_S
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
