"""Speed of the step model: a 16,384-GPU Llama-3-405B plan (< 50 ms) and a 10-size scale (< 1 s)."""

from __future__ import annotations

import time

from slowlink.spec.cluster import cluster_from_mapping
from slowlink.workload.spec import workload_from_mapping
from slowlink.workload.step import plan


def main() -> None:
    cluster = cluster_from_mapping({
        "name": "h100-16k", "nodes": 2048, "gpus_per_node": 8, "gpu": "h100-sxm",
        "scale_up": {"link": "nvlink4", "domain_gpus": 8},
        "nics": {"compute": {"per_node": 8, "speed_gbit_s": 400}},
        "fabric": {"transport": "roce", "topology": "fat-tree", "tiers": 3}})
    w = workload_from_mapping({
        "model": {"preset": "llama3-405b"},
        "training": {"global_batch": 2048, "micro_batch": 1, "precision": "bf16", "recompute": "full"},
        "parallel": {"tp": 8, "pp": 16, "dp": 128, "vp": 1, "zero": 1,
                     "first_stage_layers": 7, "last_stage_layers": 7}})
    plan(w, cluster)
    n = 20
    t0 = time.perf_counter()
    for _ in range(n):
        r = plan(w, cluster)
    dt = (time.perf_counter() - t0) / n
    print(f"llama3-405b on 16384 GPUs: {dt * 1e3:.2f} ms per plan (target < 50 ms); "
          f"step {r.step_time_s:.2f} s, MFU {r.mfu:.1%}")
    from slowlink.workload.scale import scale

    sizes = [128, 192, 256, 384, 512, 768, 1024, 1280, 1536, 2048]
    t0 = time.perf_counter()
    pts = scale(w, cluster, sizes, "per-gpu-batch")
    print(f"10-size scale: {(time.perf_counter() - t0) * 1e3:.1f} ms (target < 1 s); "
          f"efficiency at 2048 nodes {pts[-1].efficiency:.1%}")


if __name__ == "__main__":
    main()
