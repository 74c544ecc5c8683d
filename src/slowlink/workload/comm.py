"""Communication per step and per parallel dimension, through the collective model.

Groups are placed in Megatron order (tp fastest, then cp, dp, pp): a dimension of size d whose members are
``stride`` ranks apart has min(d, gpus_per_node // stride) members per node, and gpus_per_node divided by
that identical groups share each node's NICs.
  TP (per layer, per micro-batch): with SP 2 all-gathers + 2 reduce-scatters of b*s*h bytes forward and
     as many backward, else 2 all-reduces each way; full recompute repeats the forward ones.
  DP (per step): all-reduce of the local gradients (ZeRO 0) or reduce-scatter + all-gather of the
     parameters (ZeRO >= 1), in grad_comm_dtype; exposed unless overlap.grad_reduce.
  PP (per micro-batch): send_recv of b*s*h/tp (scatter/gather) forward and backward per virtual stage.
"""

from __future__ import annotations

from slowlink.collectives import Group, predict
from slowlink.spec.cluster import Cluster
from slowlink.workload.memory import params_per_gpu
from slowlink.workload.spec import Workload

_DTYPE = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0}


def group(cluster: Cluster, size: int, stride: int) -> Group:
    """The communicator of a dimension of ``size`` ranks, ``stride`` ranks apart, placed in blocks."""
    g = cluster.gpus_per_node
    per_node = max(1, min(size, g // stride)) if stride < g else 1
    return Group(size, per_node, max(1, g // per_node))


def tp_layer_s(w: Workload, cluster: Cluster) -> float:
    """Exposed TP seconds of one layer, one micro-batch, forward + backward (+ recompute)."""
    p, m, t = w.parallel, w.model, w.training
    if p.tp == 1:
        return 0.0
    size = t.micro_batch * m.seq_len / p.cp * m.hidden * _DTYPE[t.precision if t.precision != "fp8" else "bf16"]
    grp = group(cluster, p.tp, 1)
    if p.sequence_parallel:
        one = predict(cluster, "all_gather", size, grp).time_s + predict(cluster, "reduce_scatter", size, grp).time_s
        fwd = 2.0 * one
    else:
        fwd = 2.0 * predict(cluster, "all_reduce", size, grp).time_s
    passes = 3.0 if t.recompute == "full" else 2.0
    return 0.0 if w.overlap.tp_comm else fwd * passes


def dp_step_s(w: Workload, cluster: Cluster) -> float:
    """Seconds of the DP gradient reduction (and ZeRO parameter all-gather) per step."""
    p = w.parallel
    if p.dp * p.cp == 1:
        return 0.0
    grp = group(cluster, p.dp * p.cp, p.tp)
    grad = params_per_gpu(w) * _DTYPE[w.training.grad_comm_dtype]
    if p.zero == 0:
        return predict(cluster, "all_reduce", grad, grp).time_s
    params = params_per_gpu(w) * 2.0
    return predict(cluster, "reduce_scatter", grad, grp).time_s + predict(cluster, "all_gather", params, grp).time_s


def pp_microbatch_s(w: Workload, cluster: Cluster) -> float:
    """Seconds of pipeline send/recv for one micro-batch on one stage (forward + backward, all chunks)."""
    p, m, t = w.parallel, w.model, w.training
    if p.pp == 1:
        return 0.0
    size = t.micro_batch * m.seq_len / p.cp * m.hidden * 2.0 / p.tp  # scatter/gather (Narayanan 2021)
    grp = group(cluster, 2, p.tp * p.cp * p.dp)
    return 2.0 * p.vp * predict(cluster, "send_recv", size, grp).time_s
