"""The step model: checks the plan, then step time = pipeline (micro-batches + bubble) + DP + optimizer.

  t_mb      = layers_on_busiest_stage * (fwd + bwd + exposed TP/CP/EP of one layer) (+ the embedding's
              gradient on the first stage, logits on the last, each with its own exposed TP collectives:
              :func:`~slowlink.workload.traffic.edge_tp`) + PP send/recv of one micro-batch
  pipeline  = m * t_mb + bubble: Megatron-Core's schedule run op by op (:func:`pipeline_bubble_s`,
              :mod:`slowlink.workload.schedule`); with equal chunks and instant hops the bubble is Narayanan et
              al. 2021's (pp - 1) / vp x a stage's micro-batch (Sec. 2.2), longer with hops (the fill and
              drain pass each chunk's output on before the next virtual stage can start, overlap.pp_comm or
              not) and with unequal end chunks
  optimizer = ADAM_BYTES_PER_PARAM * local parameters (/ dp*cp under ZeRO) / HBM bandwidth, or local
              parameters x the device's measured AdamW seconds per parameter (`bench compute`)
  step      = pipeline + exposed DP + optimizer + DP contention (+ deferred output-layer weight gradients)
              + the stack's gradient-norm all-reduces; the last stage waits for the stack's loss all-reduce in each
              micro-batch (:mod:`slowlink.workload.step_sync`). Both count as DP time and DP calls.
With ``overlap.tp_comm`` (and SP) the TP collectives are paired with GEMMs as Transformer Engine's userbuffers
does (:func:`~slowlink.workload.tp_overlap.tp_overlap`). Overlapped communication slows the compute it hides
behind (its CTAs hold SMs: :func:`~slowlink.workload.traffic.overlap_contention_s`): the hidden TP and CP
traffic of a layer lengthen that layer, the hidden DP traffic the step.
Communication is priced by a :data:`~slowlink.workload.comm.CommCost` (analytical by default) on the
groups of :mod:`slowlink.workload.placement`; exposure rules are in :mod:`slowlink.workload.traffic`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from slowlink import units
from slowlink.catalog import Gpu
from slowlink.errors import InfeasiblePlan
from slowlink.spec.cluster import Cluster
from slowlink.spec.workload import Workload, check_hardware
from slowlink.topology.degraded import paced_gpu
from slowlink.workload.comm import CommCost, analytical_cost, explain, groups_of, tp_spans_nodes
from slowlink.workload.compute import (
    elementwise_bw_bytes_s,
    gemm_time_s,
    layer_compute,
    layer_parts,
    logits_parts,
    output_gemm,
)
from slowlink.workload.embedding import embedding_grad_bytes
from slowlink.workload.flops import hardware_flops_per_step, model_flops_per_step
from slowlink.workload.fp8 import other_precision
from slowlink.workload.memory import Memory, check_fits, memory, params_per_gpu
from slowlink.workload.schedule import bubble_ratio, pipeline_s, rank_layers, stage_layers
from slowlink.workload.step_sync import step_sync
from slowlink.workload.tp_overlap import tp_overlap
from slowlink.workload.traffic import DimComm, EdgeTp, all_dims, comm_sm_share, edge_tp, overlap_contention_s

ADAM_BYTES_PER_PARAM = 40.0  # fp32 master, m, v read+written (24), fp32 grad read (4), norm/unscale passes
DIM_WORDS = {"tp": "TP activation collectives", "cp": "CP ring-attention K/V exchange",
             "ep": "MoE token dispatch (EP all-to-all, TP gather/scatter)", "pp": "PP send/recv between stages",
             "dp": "DP gradient reduction"}
WAIT_SHARE = 0.02  # a wait (communication, storage) is named as the bottleneck only above this share of the step


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
    contention_s: float = 0.0
    comm_s: dict[str, float] = field(default_factory=dict)
    comm_total_s: dict[str, float] = field(default_factory=dict)
    tp_spans_nodes: bool = False
    bottleneck: str = ""
    bottleneck_dim: str = ""
    dp_window_s: float = 0.0  # the backward the DP gradient reduction hides behind (0 without overlap.grad_reduce)
    collectives_per_step: dict[str, float] = field(default_factory=dict)  # calls by dimension, slowest stage's GPU

    @property
    def exposed_comm_s(self) -> float:
        return sum(self.comm_s.values())

    @property
    def comm_compute_ratio(self) -> float:
        """Total (not only exposed) communication seconds / compute seconds (0 without compute)."""
        return sum(self.comm_total_s.values()) / self.compute_s if self.compute_s else 0.0

    def to_json(self) -> dict[str, object]:
        exposed = self.exposed_comm_s
        return {
            "step_time_s": self.step_time_s, "tokens_per_s": self.tokens_per_s,
            "tflops_per_gpu": self.tflops_per_gpu, "mfu": self.mfu, "hfu": self.hfu,
            "compute_s": self.compute_s, "exposed_comm_s": exposed, "comm_s": self.comm_s,
            "total_comm_s": self.comm_total_s, "bubble_s": self.bubble_s, "optimizer_s": self.optimizer_s,
            "overlap_contention_s": self.contention_s,
            "comm_compute_ratio": self.comm_compute_ratio,
            "memory_gib_per_gpu": self.memory.total_bytes / units.GiB, "memory": self.memory.to_json(),
            "tp_spans_nodes": self.tp_spans_nodes, "bottleneck": self.bottleneck,
            "bottleneck_dim": self.bottleneck_dim, "collectives_per_step": self.collectives_per_step,
        }


def stage_time_s(w: Workload, layers_s: tuple[float, float, float], first_extra_s: float,
                 last_extra_s: float) -> float:
    """Seconds of one micro-batch on the slowest pipeline stage: its layers, plus the embedding's work on the
    first stage and the logits' on the last (one stage holds both when pp is 1)."""
    first, mid, last = layers_s
    if w.parallel.pp == 1:
        return first + first_extra_s + last_extra_s
    return max(first + first_extra_s, mid, last + last_extra_s)


def output_wgrad_s(w: Workload, gpu: Gpu) -> float:
    """Seconds of the output layer's weight-gradient GEMM, dW = X^T dY over [tokens, h] x [tokens, V/tp], for one
    micro-batch: what ``overlap.defer_embedding_wgrad`` takes out of the last stage's backward."""
    return gemm_time_s(output_gemm(w).backward()[1], gpu, other_precision(w))


def embedding_grad_s(w: Workload, gpu: Gpu) -> float:
    """Seconds of the embedding's dense weight gradient per micro-batch on the first stage
    (:func:`~slowlink.workload.embedding.embedding_grad_bytes` at the elementwise rate)."""
    return embedding_grad_bytes(w) / elementwise_bw_bytes_s(gpu)


def optimizer_s(w: Workload, gpu: Gpu) -> float:
    """Seconds of the optimizer step on one GPU (module docstring): its local parameters (/ dp x cp under ZeRO) x
    ADAM_BYTES_PER_PARAM / HBM bandwidth, or x the device's measured AdamW seconds per parameter."""
    shard = w.parallel.dp_shards if w.parallel.zero >= 1 else 1
    per_param = ADAM_BYTES_PER_PARAM / gpu.hbm_bw_bytes_s if gpu.adam_s_per_param is None else gpu.adam_s_per_param
    return per_param * params_per_gpu(w) / shard


@dataclass(frozen=True)
class BubbleEdges:
    """The work of the model's two ends that the pipeline's first and last chunk carry, per micro-batch: the
    embedding's gradient (first rank, chunk 0, backward), both ends' TP collectives, the output layer and loss
    (last rank, last chunk: ``logits_s`` forward + backward as the drain runs it, ``logits_forward_s`` of it
    forward)."""

    embedding_grad_s: float
    tp: EdgeTp
    logits_s: float
    logits_forward_s: float
    deferred: bool


def pipeline_bubble_s(w: Workload, micro: int, layers: tuple[int, int, int], per_layer_s: float,
                      forward_share: float, pp_comm: DimComm, edges: BubbleEdges, fill_s: float,
                      wgrad_share: float = 0.0) -> float:
    """The pipeline's fill and drain, and any wait of its steady state: Megatron-Core's schedule run op by op
    (:mod:`slowlink.workload.schedule`) beyond ``micro`` x the slowest rank's micro-batch (``fill_s`` + its exposed
    hops). Each rank's chunk holds its
    stage's layers / vp, a layer ``per_layer_s`` (``forward_share`` of it forward: the layer's compute split,
    applied to its waits too), each op its share of the exposed PP hops; the first rank's chunk 0 adds the
    embedding's gradient and collectives, the last rank's last chunk the output layer and loss; a hop (one
    send/recv of ``pp_comm``) separates ops on neighbouring ranks, less the part the sending op already waited
    for (all of it when the send/recv blocks: no overlap.pp_comm). The closed form (pp - 1) / vp x (fill + the
    micro-batch's hops) is what this gives for equal chunks and instant hops. Longer: the first micro-batch
    crosses all pp x vp virtual stages in the warm-up and again in the cool-down, at least 2 (pp vp - 1) hops
    rather than 2 (pp - 1); unequal end chunks stall their neighbours (Nemotron-4 340B, one layer per chunk, +2%
    of a step; Llama 3 405B's lighter 7-layer end stages with the logits on one chunk, +4.5% per micro-batch).
    ``parallel.pp_schedule`` zero-bubble or dualpipe scales that 1F1B bubble by
    :func:`~slowlink.workload.schedule.bubble_ratio`, ``wgrad_share`` of a layer being its weight gradients."""
    p = w.parallel
    if p.pp == 1:
        return 0.0
    hop = pp_comm.total_s / (2.0 * p.vp)
    per_op = pp_comm.exposed_s / (2.0 * p.vp)
    out_s = edges.tp.output_deferred_s if edges.deferred else edges.tp.output_s
    extra = {("F", 0, 0): edges.tp.embedding_fwd_s,
             ("B", 0, 0): edges.embedding_grad_s + edges.tp.embedding_s - edges.tp.embedding_fwd_s,
             ("F", p.pp - 1, p.vp - 1): edges.logits_forward_s + edges.tp.output_fwd_s,
             ("B", p.pp - 1, p.vp - 1): edges.logits_s - edges.logits_forward_s + out_s - edges.tp.output_fwd_s}

    def op_s(kind: str, rank: int, chunk: int) -> float:
        n = rank_layers(layers, p.pp, rank)
        share = forward_share if kind == "F" else 1.0 - forward_share
        return n / p.vp * per_layer_s * share + per_op + extra.get((kind, rank, chunk), 0.0)

    # a blocking send/recv (no overlap.pp_comm) is inside the sending op already: only the rest delays the receiver
    bubble = max(0.0, pipeline_s(p.pp, p.vp, micro, op_s, hop - per_op) - micro * (fill_s + pp_comm.exposed_s))
    if p.pp_schedule == "1f1b":
        return bubble
    # zero-bubble and DualPipe: 1F1B's bubble, op by op, scaled by their closed forms (schedule.bubble_ratio); a
    # Linear's weight gradient is one of its two backward GEMMs of equal FLOPs: W = half the weight GEMMs' backward
    return bubble * bubble_ratio(p.pp_schedule, p.pp, forward_share, 1.0 - forward_share, wgrad_share)


def deferred_microbatches(w: Workload, micro: int) -> int:
    """Micro-batches whose output-layer weight gradient ``overlap.defer_embedding_wgrad`` defers: Megatron-Core
    core_r0.10.0 keeps a micro-batch's input and output gradient while fewer than wgrad_deferral_limit are kept (0:
    no limit), else computes its weight gradient at once (tensor_parallel/layers.py, ColumnParallelLinear.forward and
    LinearWithGradAccumulationAndAsyncCommunication.backward)."""
    if not w.overlap.defer_embedding_wgrad:
        return 0
    limit = w.overlap.wgrad_deferral_limit
    return micro if limit == 0 else min(micro, limit)


def deferred_wgrad_exposed_s(w: Workload, deferred: int, wgrad_s: float, stage_backward_s: float) -> float:
    """Seconds the step waits for ``deferred`` deferred output-layer weight gradients of ``wgrad_s`` each.

    Megatron-Core core_r0.10.0: after the schedule's last backward the last pipeline rank runs the kept weight-gradient
    GEMMs (pipeline_parallel/schedules.py finish_embedding_wgrad_compute -> utils.py drain_embedding_wgrad_compute,
    the SP all-gather of the next input beside each GEMM), before finalize_model_grads. That rank's last backward is
    for its first model chunk; the drain then passes the gradient through the pp - 1 stages below it, one chunk's
    backward each, while the last rank idles: (pp - 1) / vp of a stage's backward (``stage_backward_s``, one
    micro-batch, every chunk). The GEMMs wait past that idle time only if longer. Not priced: the SP all-gathers
    (one [tokens, h] input each, over NVLink beside the previous GEMM).
    """
    idle = (w.parallel.pp - 1) / w.parallel.vp * stage_backward_s
    return max(0.0, deferred * wgrad_s - idle)


def fit_dp(w: Workload, cluster: Cluster) -> Workload:
    """``w`` with ``parallel.dp: auto`` resolved on ``cluster`` (:meth:`Parallel.on_gpus`); else ``w``."""
    return w if w.parallel.resolved else replace(w, parallel=w.parallel.on_gpus(cluster.gpus))


def check_plan(w: Workload, cluster: Cluster) -> int:
    """Every divisibility rule of the plan, and the precisions the GPU must have; returns the number of
    micro-batches per step."""
    check_hardware(w, cluster)
    p, t, m = w.parallel, w.training, w.model
    product = p.world_size
    if product != cluster.gpus:
        raise InfeasiblePlan(f"parallel: tp ({p.tp}) * pp ({p.pp}) * dp ({p.dp}) * cp ({p.cp}) = {product} "
                             f"!= gpus ({cluster.gpus})", rule="parallel_divides")
    if m.heads % p.tp or (m.kv_heads % p.tp and p.tp % m.kv_heads):
        raise InfeasiblePlan(f"parallel.tp ({p.tp}) must divide model.heads ({m.heads}) and kv_heads "
                             f"({m.kv_heads})", rule="tp_divides_heads")
    stage_layers(w)
    if t.global_batch % (t.micro_batch * p.dp):
        raise InfeasiblePlan(f"training.global_batch ({t.global_batch}) must be divisible by micro_batch "
                             f"({t.micro_batch}) * dp ({p.dp}) = {t.micro_batch * p.dp}", rule="batch_divides")
    if m.moe and m.moe.experts % p.ep:
        raise InfeasiblePlan(f"parallel.ep ({p.ep}) must divide model.moe.experts ({m.moe.experts})",
                             rule="ep_divides_experts")
    if p.dp % p.ep:
        raise InfeasiblePlan(f"parallel.ep ({p.ep}) must divide dp ({p.dp})", rule="ep_divides_dp")
    micro = w.micro_batches
    if w.overlap.ep_comm and micro < 2:
        raise InfeasiblePlan(f"overlap.ep_comm (true): pairs micro-batches, and each DP rank runs {micro} per step "
                             f"(training.global_batch / (micro_batch * dp) = {t.global_batch} / ({t.micro_batch} * "
                             f"{p.dp})); needs 2 or more", rule="ep_overlap_pairs")
    if p.pp_schedule == "dualpipe" and micro % 2:
        raise InfeasiblePlan(f"parallel.pp_schedule (dualpipe): needs an even number of micro-batches per step, not "
                             f"{micro} (training.global_batch / (micro_batch * dp)); DualPipe 'requires that the "
                             "pipeline stages and micro-batches be divisible by 2' (DeepSeek-V3, Sec. 3.2.1)",
                             rule="dualpipe_even_micro_batches")
    if p.vp > 1 and p.pp > 1 and micro % p.pp:
        # Megatron-Core core_r0.10.0 schedules.py l.645-665: groups of pp micro-batches, none left over
        raise InfeasiblePlan(f"parallel.vp ({p.vp}): the interleaved schedule needs the micro-batches per step, "
                             f"training.global_batch / (micro_batch * dp) = {micro}, to be a multiple of "
                             f"parallel.pp ({p.pp}), as Megatron-LM requires", rule="interleave_divides_batch")
    return micro


def plan(w: Workload, cluster: Cluster, cost: CommCost | None = None, *, check_memory: bool = True) -> StepResult:
    """Step time, throughput, MFU/HFU, memory and the bottleneck of ``w`` on ``cluster``.

    ``cost`` prices every collective (default: the analytical model, :func:`analytical_cost`);
    ``check_memory`` False skips the HBM check (validation of published runs that did fit).
    """
    w = fit_dp(w, cluster)
    micro = check_plan(w, cluster)
    mem = memory(w)
    if check_memory:
        check_fits(mem, cluster.gpu.hbm_bytes)
    price = cost if cost is not None else analytical_cost(cluster)
    first, mid, last = stage_layers(w)
    busiest = max(first, mid, last)
    paced, _ = paced_gpu(cluster)  # the slowest GPU paces every synchronised rank (spec `degraded:`)
    lc = layer_compute(w, paced)
    dims = all_dims(w, cluster, price, lc, busiest, micro)
    tp = dims["tp"]
    tp_total, tp_exp, tp_hidden = tp.total_s, tp.exposed_s, 0.0
    if w.overlap.tp_comm and w.parallel.sequence_parallel:  # userbuffers (Megatron asserts SP for it)
        ub = tp_overlap(w, price, paced)
        tp_total, tp_exp, tp_hidden = ub.total_s, ub.exposed_s, ub.hidden_s
    per_layer_wait = tp_exp + dims["cp"].exposed_s + dims["ep"].exposed_s
    share = comm_sm_share(paced.sms)
    beside = tp_hidden + dims["cp"].total_s - dims["cp"].exposed_s + dims["ep"].total_s - dims["ep"].exposed_s
    layer_slow = overlap_contention_s(beside, lc.total_s, share)
    per_layer = lc.total_s + per_layer_wait + layer_slow
    logit_parts = logits_parts(w, paced)
    # a Linear's weight gradient is one of its two backward GEMMs of equal FLOPs: half the weight GEMMs' backward
    layer_wgrad_s = layer_parts(w, paced).gemm_bwd_s / 2.0 if w.parallel.pp_schedule != "1f1b" else 0.0
    logits, wgrad = logit_parts.total_s, output_wgrad_s(w, paced)
    deferred = deferred_microbatches(w, micro)  # their output-layer wgrad moves to the pipeline drain
    emb = embedding_grad_s(w, paced)  # the first stage's, every micro-batch
    pp_mb = dims["pp"].exposed_s

    edge = edge_tp(w, price, paced)  # the embedding's and the output layer's TP collectives, first and last stage

    def slowest(layer_s: float, last_extra_s: float, first_wait_s: float = 0.0, last_wait_s: float = 0.0) -> float:
        return stage_time_s(w, (first * layer_s, mid * layer_s, last * layer_s), emb + first_wait_s,
                            last_extra_s + last_wait_s)

    sync = step_sync(w, price)
    no_loss = slowest(per_layer, logits, edge.embedding_s, edge.output_s)
    no_loss_deferred = slowest(per_layer, logits - wgrad, edge.embedding_s, edge.output_deferred_s)
    stage = slowest(per_layer, logits, edge.embedding_s, edge.output_s + sync.loss_s)
    stage_deferred = slowest(per_layer, logits - wgrad, edge.embedding_s, edge.output_deferred_s + sync.loss_s)
    # what the edge collectives add to the slowest stage's micro-batches: reported with the layers' TP waits; what
    # the loss all-reduce adds, with DP's
    edge_wait = (deferred * (no_loss_deferred - slowest(per_layer, logits - wgrad))
                 + (micro - deferred) * (no_loss - slowest(per_layer, logits)))
    loss_wait = deferred * (stage_deferred - no_loss_deferred) + (micro - deferred) * (stage - no_loss)
    pipeline = deferred * stage_deferred + (micro - deferred) * stage + micro * pp_mb
    compute = deferred * slowest(lc.total_s, logits - wgrad) + (micro - deferred) * slowest(lc.total_s, logits)
    all_deferred = deferred == micro  # else the drain's last micro-batches keep their wgrad
    bubble = pipeline_bubble_s(w, micro, (first, mid, last), per_layer, lc.forward_s / lc.total_s, dims["pp"],
                               BubbleEdges(emb, edge, logits - (wgrad if all_deferred else 0.0),
                                           logit_parts.forward_s, all_deferred),
                               stage_deferred if all_deferred else stage,
                               layer_wgrad_s / lc.total_s)
    opt = optimizer_s(w, cluster.gpu)
    # the hidden DP traffic runs beside the step's compute (ZeRO 3: every micro-batch's), never longer than it
    dp_slow = overlap_contention_s(dims["dp"].total_s - dims["dp"].exposed_s, micro * busiest * lc.total_s, share)
    drain = deferred_wgrad_exposed_s(w, deferred, wgrad, last * lc.backward_s)
    step = pipeline + bubble + opt + dims["dp"].exposed_s + dp_slow + drain + sync.norm_s
    contention = micro * busiest * layer_slow + dp_slow
    exposed = {"tp": micro * busiest * tp_exp + edge_wait, "cp": micro * busiest * dims["cp"].exposed_s,
               "ep": micro * busiest * dims["ep"].exposed_s, "pp": micro * pp_mb,
               "dp": dims["dp"].exposed_s + loss_wait + sync.norm_s}
    totals = {"tp": micro * (busiest * tp_total + edge.total_s), "cp": micro * busiest * dims["cp"].total_s,
              "ep": micro * busiest * dims["ep"].total_s, "pp": micro * dims["pp"].total_s,
              "dp": dims["dp"].total_s + micro * sync.loss_s + sync.norm_s}
    calls = {"tp": micro * (busiest * tp.calls + edge.calls), "cp": micro * busiest * dims["cp"].calls,
             "ep": micro * busiest * dims["ep"].calls, "pp": micro * dims["pp"].calls,
             "dp": dims["dp"].calls + micro * sync.loss_calls + sync.norm_calls}
    gb = w.training.global_batch
    peak = cluster.gpu.peak(w.training.precision)
    mf = model_flops_per_step(w.model, gb) / (step * cluster.gpus)
    hf = hardware_flops_per_step(w.model, gb, w.training.recompute) / (step * cluster.gpus)
    spans = tp_spans_nodes(w.parallel, cluster)
    dim, words = bottleneck(w, cluster, dims, exposed, step, compute, bubble, spans)
    return StepResult(step_time_s=step, tokens_per_s=w.tokens_per_step / step, tflops_per_gpu=mf / 1e12,
                      mfu=mf / peak, hfu=hf / peak, compute_s=compute, bubble_s=bubble, optimizer_s=opt,
                      memory=mem, contention_s=contention, comm_s=exposed, comm_total_s=totals, tp_spans_nodes=spans,
                      bottleneck=words, bottleneck_dim=dim,
                      dp_window_s=busiest * lc.backward_s if w.overlap.grad_reduce else 0.0,
                      collectives_per_step=calls)


def bottleneck(w: Workload, cluster: Cluster, dims: dict[str, DimComm], exposed: dict[str, float],
               step: float, compute: float, bubble: float, spans: bool) -> tuple[str, str]:
    """(dimension, sentence): the largest wait of the step, which link carries it and its share."""
    dim = max(exposed, key=lambda k: exposed[k])
    wait = exposed[dim]
    if wait < WAIT_SHARE * step and bubble < 0.05 * step:
        return "compute", f"compute-bound: compute is {compute / step:.0%} of the step; no wait above {WAIT_SHARE:.0%}"
    if bubble > wait:
        return "pp_bubble", (f"pipeline bubble: {bubble:.3g} s, {bubble / step:.0%} of the step "
                             f"(pp {w.parallel.pp}, vp {w.parallel.vp}, "
                             f"{w.micro_batches} micro-batches)")
    d = dims[dim]
    pred = explain(cluster, d.op, d.size_bytes, groups_of(w.parallel, d.groups))
    link = pred.bottleneck if pred is not None else "the network"
    text = f"{DIM_WORDS[dim]} over {link}: {wait:.3g} s exposed, {wait / step:.0%} of the step"
    if dim == "tp" and spans:
        text += " (the TP group spans nodes)"
    return dim, text
