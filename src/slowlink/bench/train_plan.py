"""What ``plan`` predicts for the model ``bench train`` ran, on a cluster file, to set against the measurement.

The workload is the benchmark's model (no preset): its layers, hidden, heads, ffn_hidden, vocab and
sequence, ungated MLP; global batch = batch x ranks, one micro-batch per step, the run's precision, no
recomputation, fp32 gradient traffic, data parallel over every rank (DDP: ZeRO 0, FSDP: ZeRO 3), with the
gradient reduction overlapped. A one-node cluster is resized to the rank count (gpus_per_node = ranks).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from slowlink.bench.train import TrainConfig
from slowlink.errors import SpecError
from slowlink.fileio import read_mapping
from slowlink.spec.cluster import Cluster, cluster_from_mapping
from slowlink.workload.spec import Workload, workload_from_mapping


def workload_for(cfg: TrainConfig, ranks: int, precision: str) -> Workload:
    return workload_from_mapping({
        "name": f"bench-train-{cfg.mode}",
        "model": {"layers": cfg.layers, "hidden": cfg.hidden, "heads": cfg.heads, "kv_heads": cfg.heads,
                  "ffn_hidden": cfg.ffn_hidden, "vocab": cfg.vocab, "seq_len": cfg.seq_len, "gated_mlp": False},
        "training": {"global_batch": cfg.batch * ranks, "micro_batch": cfg.batch, "precision": precision,
                     "recompute": "none", "grad_comm_dtype": "fp32"},
        "parallel": {"tp": 1, "pp": 1, "dp": ranks, "cp": 1, "zero": 3 if cfg.mode == "fsdp" else 0,
                     "sequence_parallel": False},
        "overlap": {"grad_reduce": True, "param_gather": True, "tp_comm": False},
    }, "bench train workload")


def cluster_for(cluster_file: Path, ranks: int) -> Cluster:
    """The cluster file, a one-node cluster resized to ``ranks`` GPUs; else it must have ``ranks`` GPUs."""
    data = read_mapping(cluster_file)
    if data.get("nodes") == 1:
        data["gpus_per_node"] = ranks
        data.setdefault("scale_up", {})["domain_gpus"] = ranks
    c = cluster_from_mapping(data, str(cluster_file), cluster_file.parent)
    if c.gpus != ranks:
        raise SpecError(f"--cluster {cluster_file}: nodes x gpus_per_node ({c.nodes} x {c.gpus_per_node}) "
                        f"must equal the ranks of the run ({ranks}) to compare with plan")
    return c


def plan_for(cfg: TrainConfig, ranks: int, precision: str, cluster_file: Path) -> dict[str, Any]:
    """plan's prediction (its JSON) for this run."""
    from slowlink.workload.step import plan

    return plan(workload_for(cfg, ranks, precision), cluster_for(cluster_file, ranks)).to_json()


def compare_with_plan(row: dict[str, Any], cfg: TrainConfig, cluster_file: Path) -> dict[str, Any]:
    """The row's measurement against plan: step, compute, exposed comm and ratio, with the step error."""
    p = plan_for(cfg, int(row["ranks"]), row["precision"], cluster_file)
    err = (float(p["step_time_s"]) - row["step_time_s"]) / row["step_time_s"]
    return {"step_time_s": p["step_time_s"], "compute_s": p["compute_s"], "exposed_comm_s": p["exposed_comm_s"],
            "comm_compute_ratio": p["comm_compute_ratio"], "mfu": p["mfu"], "error_pct": 100 * err}
