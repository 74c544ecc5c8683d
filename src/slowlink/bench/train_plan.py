"""What ``plan`` predicts for the model ``bench train`` ran, on a cluster file, to set against the measurement.

The workload is the benchmark's model (no preset): its layers, hidden, heads, ffn_hidden, vocab and
sequence, ungated MLP; global batch = batch x ranks, one micro-batch per step, the run's precision, no
recomputation, fp32 gradient traffic, data parallel over every rank (DDP: ZeRO 0, FSDP: ZeRO 3), with the
gradient reduction overlapped. A one-node cluster is resized to the rank count (gpus_per_node = ranks).
A profiled row (``bench train --profile``) is set against the step model's own split of the same compute-only
step (:func:`modelled_profile`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slowlink.bench.profile import CLASSES
from slowlink.bench.record import TrainPlan
from slowlink.bench.train import TrainConfig
from slowlink.errors import SpecError
from slowlink.fileio import read_mapping
from slowlink.spec.cluster import Cluster, cluster_from_mapping
from slowlink.spec.workload import Workload, workload_from_mapping

if TYPE_CHECKING:
    from slowlink.workload.step import StepResult


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


def plan_for(cfg: TrainConfig, ranks: int, precision: str, cluster_file: Path) -> StepResult:
    """plan's step for this run."""
    from slowlink.workload.step import plan

    return plan(workload_for(cfg, ranks, precision), cluster_for(cluster_file, ranks))


def compare_with_plan(cfg: TrainConfig, cluster_file: Path, ranks: int, precision: str, step_time_s: float,
                      profile: Mapping[str, float] | None = None) -> TrainPlan:
    """A run of ``ranks`` at ``precision`` that measured ``step_time_s`` (and, profiled, ``profile``: seconds
    by kernel class) against plan: step, compute, exposed comm and ratio, with the step error."""
    p = plan_for(cfg, ranks, precision, cluster_file)
    err = (p.step_time_s - step_time_s) / step_time_s
    given: dict[str, Any] = {}
    if profile is not None:
        model = modelled_profile(cfg, ranks, precision, cluster_file)
        given = {"profile": model, "profile_diff": {k: profile[k] - v for k, v in model.items()}}  # measured - model
    return TrainPlan(step_time_s=p.step_time_s, compute_s=p.compute_s, exposed_comm_s=p.exposed_comm_s,
                     comm_compute_ratio=p.comm_compute_ratio, mfu=p.mfu, error_pct=100 * err, **given)


def modelled_profile(cfg: TrainConfig, ranks: int, precision: str, cluster_file: Path) -> dict[str, float]:
    """The step model's seconds per compute-only step of one rank (the benchmark's local, unsharded model: the
    workload on one GPU, priced on the cluster's GPU) by the classes of :mod:`slowlink.bench.profile`: layers x
    :func:`~slowlink.workload.compute.layer_parts` + the output layer's
    :func:`~slowlink.workload.compute.logits_parts` + the embedding's gradient + the optimizer step (what plan
    adds up for one micro-batch on one stage, compute_s + optimizer_s). elementwise holds the norms, activations,
    softmax, MoE dispatch, loss and gradient accumulation; other the recomputation; idle is 0: the model has no
    gap term (launch gaps are inside the GEMM efficiency E_GEMM)."""
    from slowlink.topology.degraded import paced_gpu
    from slowlink.workload.compute import layer_parts, logits_parts
    from slowlink.workload.step import embedding_grad_s, optimizer_s

    w = workload_for(cfg, 1, precision)
    cluster = cluster_for(cluster_file, ranks)
    gpu, _ = paced_gpu(cluster)  # plan's pacing: the layers on the slowest GPU, the optimizer on the catalog one
    lp, lg = layer_parts(w, gpu), logits_parts(w, gpu)
    n = w.model.layers
    elementwise = (n * (lp.elementwise_fwd_s + lp.elementwise_bwd_s + lp.moe_fwd_s + lp.moe_bwd_s
                        + lp.accumulate_s) + lg.cross_entropy_s + lg.accumulate_s + embedding_grad_s(w, gpu))
    per = {"gemm": n * (lp.gemm_fwd_s + lp.gemm_bwd_s) + lg.gemm_s, "attention": n * (lp.attn_fwd_s + lp.attn_bwd_s),
           "elementwise": elementwise, "optimizer": optimizer_s(w, cluster.gpu), "other": n * lp.recompute_s}
    out = {f"{c}_s": per[c] for c in CLASSES}
    out.update(idle_s=0.0, wall_s=sum(per.values()))
    return out
