"""The step model: checks the plan, then step time = pipeline (micro-batches + bubble) + optimizer.

  t_mb     = layers_on_busiest_stage * (fwd + bwd of one layer) (+ logits on the last stage)
  pipeline = (m + (pp - 1) / vp) * t_mb        (1F1B bubble (pp-1)/m; interleaved (pp-1)/(vp*m);
                                                Narayanan et al. 2021 Sec. 2.2)
  optimizer = 18 bytes read+written per local parameter... (Adam, fp32 states) / HBM bandwidth
Communication per dimension comes from the collective model (slowlink.collectives.predict) once it is
merged; until then comm_s is empty and step time is compute + bubble + optimizer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from slowlink.errors import InfeasiblePlan
from slowlink.spec.cluster import Cluster
from slowlink.workload.comm import dp_step_s, pp_microbatch_s, tp_layer_s
from slowlink.workload.compute import layer_compute, logits_compute_s
from slowlink.workload.flops import hardware_flops_per_step, model_flops_per_step
from slowlink.workload.memory import Memory, check_fits, memory, params_per_gpu
from slowlink.workload.spec import Workload

ADAM_BYTES_PER_PARAM = 40.0  # read+write of fp32 master, m, v (24), read fp32 grad (4)... + bf16 param write


@dataclass(frozen=True)
class StepResult:
    step_time_s: float
    tokens_per_s: float
    tflops_per_gpu: float
    mfu: float
    hfu: float
    compute_s: float
    bubble_s: float
    optimizer_s: float
    memory: Memory
    comm_s: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        exposed = sum(self.comm_s.values())
        return {
            "step_time_s": self.step_time_s, "tokens_per_s": self.tokens_per_s,
            "tflops_per_gpu": self.tflops_per_gpu, "mfu": self.mfu, "hfu": self.hfu,
            "compute_s": self.compute_s, "exposed_comm_s": exposed, "comm_s": self.comm_s,
            "bubble_s": self.bubble_s, "optimizer_s": self.optimizer_s,
            "comm_compute_ratio": exposed / self.compute_s if self.compute_s else 0.0,
            "memory_gib_per_gpu": self.memory.total_bytes / 2**30, "memory": self.memory.to_json(),
        }


def stage_layers(w: Workload) -> tuple[int, int, int]:
    """(first, middle, last) stage layer counts; raise when the stages do not divide the layers."""
    p, n = w.parallel, w.model.layers
    first = p.first_stage_layers
    last = p.last_stage_layers
    inner_stages = p.pp - (first is not None) - (last is not None)
    rest = n - (first or 0) - (last or 0)
    if inner_stages <= 0 or rest % (inner_stages * p.vp):
        raise InfeasiblePlan(
            f"parallel: model.layers ({n}) minus first/last stage layers ({first}, {last}) = {rest} "
            f"must be divisible by the other stages x vp ({max(inner_stages, 0)} x {p.vp})")
    mid = rest // inner_stages
    return (first if first is not None else mid, mid, last if last is not None else mid)


def check_plan(w: Workload, cluster: Cluster) -> int:
    """Every divisibility rule of the plan; returns the number of micro-batches per step."""
    p, t, m = w.parallel, w.training, w.model
    product = p.tp * p.pp * p.dp * p.cp
    if product != cluster.gpus:
        raise InfeasiblePlan(f"parallel: tp ({p.tp}) * pp ({p.pp}) * dp ({p.dp}) * cp ({p.cp}) = {product} "
                             f"!= gpus ({cluster.gpus})")
    if m.heads % p.tp or (m.kv_heads % p.tp and p.tp % m.kv_heads):
        raise InfeasiblePlan(f"parallel.tp ({p.tp}) must divide model.heads ({m.heads}) and kv_heads ({m.kv_heads})")
    stage_layers(w)
    if t.global_batch % (t.micro_batch * p.dp):
        raise InfeasiblePlan(f"training.global_batch ({t.global_batch}) must be divisible by micro_batch "
                             f"({t.micro_batch}) * dp ({p.dp}) = {t.micro_batch * p.dp}")
    if m.moe and m.moe.experts % p.ep:
        raise InfeasiblePlan(f"parallel.ep ({p.ep}) must divide model.moe.experts ({m.moe.experts})")
    if p.dp % p.ep:
        raise InfeasiblePlan(f"parallel.ep ({p.ep}) must divide dp ({p.dp})")
    return t.global_batch // (t.micro_batch * p.dp)


def plan(w: Workload, cluster: Cluster) -> StepResult:
    """Step time, throughput, MFU/HFU and memory of ``w`` on ``cluster``."""
    micro = check_plan(w, cluster)
    mem = memory(w)
    check_fits(mem, cluster.gpu.hbm_bytes)
    first, mid, last = stage_layers(w)
    lcomp = layer_compute(w, cluster.gpu)
    tp_s = tp_layer_s(w, cluster)
    pp_s = pp_microbatch_s(w, cluster)
    lc = lcomp.total_s + tp_s
    t_mb = max(first * lc, mid * lc, last * lc + logits_compute_s(w, cluster.gpu)) + pp_s
    compute = micro * (t_mb - pp_s - max(first, mid, last) * tp_s)
    dp_s = dp_step_s(w, cluster)
    window = max(first, mid, last) * lcomp.backward_s if w.overlap.grad_reduce else 0.0
    dp_exposed = max(0.0, dp_s - window)
    comm = {"tp": micro * max(first, mid, last) * tp_s, "pp": micro * pp_s, "dp": dp_exposed}
    bubble = (w.parallel.pp - 1) / w.parallel.vp * t_mb
    shard = w.parallel.dp * w.parallel.cp if w.parallel.zero >= 1 else 1
    opt = ADAM_BYTES_PER_PARAM * params_per_gpu(w) / shard / cluster.gpu.hbm_bw_bytes_s
    step = micro * t_mb + bubble + opt + dp_exposed
    gb = w.training.global_batch
    peak = cluster.gpu.peak(w.training.precision)
    mf = model_flops_per_step(w.model, gb) / (step * cluster.gpus)
    hf = hardware_flops_per_step(w.model, gb, w.training.recompute) / (step * cluster.gpus)
    return StepResult(step_time_s=step, tokens_per_s=gb * w.model.seq_len / step, tflops_per_gpu=mf / 1e12,
                      mfu=mf / peak, hfu=hf / peak, compute_s=compute, bubble_s=bubble, optimizer_s=opt,
                      memory=mem, comm_s=comm)
