"""Concrete advice for a plan, each piece checked by re-running the model with the change.

Each candidate answers one wait (``answers``, a :attr:`StepResult.bottleneck_dim` or ``storage``):

  tp         keep TP inside the scale-up domain; overlap TP collectives with the GEMMs
  dp         overlap the gradient reduction / parameter gather; BF16 or FP8 gradients; the stack's gradient
             bucket size (the best of 1/4, 1/2, 2 and 4 times the current one: smaller buckets shorten the
             reduction left after the backward, larger ones pay fewer calls' latency)
  ep         keep EP inside the scale-up domain; overlap one micro-batch's token dispatch with another's compute
  pp         overlap the PP send/recv with compute
  pp_bubble  virtual stages (interleaved 1F1B), more micro-batches per pipeline (a smaller micro-batch at the
             same global batch), fewer stages
  compute    a larger micro-batch (fewer, larger GEMMs)
  fabric     a non-blocking fabric, an RDMA fabric (every dimension that crosses it)
  storage    the dataset in shards instead of small files; asynchronous checkpoints (re-run of the storage
             model: the step with its data stall and checkpoint time per step)

A change is kept when it fits in memory and cuts the step by more than MIN_GAIN; the advice that answers the
stated bottleneck comes first (a faster fabric answers every communication bottleneck), then the rest, each
group by gain.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from slowlink import units
from slowlink.errors import SlowlinkError
from slowlink.spec.cluster import Cluster, with_transport
from slowlink.spec.workload import Workload
from slowlink.units import PRECISION_BYTES
from slowlink.workload.comm import CommCost
from slowlink.workload.step import DIM_WORDS, StepResult, plan

if TYPE_CHECKING:
    from slowlink.storage.plan import StoragePlan

MIN_GAIN = 0.01  # a change must save 1% of the step to be worth saying


@dataclass(frozen=True)
class Advice:
    change: str
    step_time_s: float
    gain: float  # share of the current step saved
    answers: str = ""  # the wait it shortens (module docstring)
    base_s: float = 0.0  # the step it is compared with
    with_storage: bool = False  # both steps include the data stall and the checkpoint's time per step

    def to_json(self) -> dict[str, object]:
        return {"change": self.change, "step_time_s": self.step_time_s, "gain": self.gain, "answers": self.answers,
                "base_step_time_s": self.base_s, "with_storage": self.with_storage}


# InfiniBand line rates a suggested NIC may have (HDR, NDR, XDR: the transports catalog's ib-* entries).
IB_SPEEDS_GBIT = (200.0, 400.0, 800.0)


def rdma_nic_gbit(cluster: Cluster) -> float:
    """The fastest InfiniBand NIC of :data:`IB_SPEEDS_GBIT` up to 400G that the GPU's host link can feed at
    line rate (a NIC sits in an x16 slot beside its GPU: a 400G NIC behind PCIe Gen4 x16, 31.5 GB/s = 252
    Gbit/s, cannot run at 400G), or the slowest when none fits."""
    from slowlink.catalog import load_catalog

    host = cluster.gpu.host_link
    limit = load_catalog().link(host).bw_bytes_s / units.Gbit if host else float("inf")
    fits = [s for s in IB_SPEEDS_GBIT if s <= min(400.0, limit)]
    return fits[-1] if fits else IB_SPEEDS_GBIT[0]


Candidate = tuple[str, str, Workload, Cluster]  # (the change in words, what it answers, workload, cluster)


def _candidates(w: Workload, cluster: Cluster) -> list[Candidate]:
    p, t, o, m = w.parallel, w.training, w.overlap, w.model
    out: list[Candidate] = []

    def upd(section: str, **kv: object) -> Workload:
        return replace(w, **{section: replace(getattr(w, section), **kv)})

    dom = cluster.scale_up.domain_gpus
    if p.tp > dom and p.tp % dom == 0:
        out.append((f"keep TP in the NVLink domain: tp {dom}, dp {p.dp * p.tp // dom}", "tp",
                    upd("parallel", tp=dom, dp=p.dp * p.tp // dom), cluster))
    for key, words in (("grad_reduce", "overlap the DP gradient reduction with the backward pass"),
                       ("param_gather", "overlap the parameter all-gather with the forward pass")):
        if not getattr(o, key):
            out.append((f"{words} (overlap.{key}: true)", "dp", upd("overlap", **{key: True}), cluster))
    if not o.tp_comm and p.tp > 1:  # userbuffers overlap needs sequence parallelism (workload.tp_overlap)
        tp_ov = replace(upd("overlap", tp_comm=True), parallel=replace(p, sequence_parallel=True))
        needs = "" if p.sequence_parallel else ", with sequence parallelism: parallel.sequence_parallel: true"
        out.append((f"overlap TP collectives with the GEMMs (userbuffers: overlap.tp_comm: true{needs})", "tp",
                    tp_ov, cluster))
    if t.grad_comm_dtype == "fp32":
        out.append(("BF16 gradients (training.grad_comm_dtype: bf16)", "dp", upd("training", grad_comm_dtype="bf16"),
                    cluster))
    if t.grad_comm_dtype == "bf16" and p.dp_shards > 1:
        out.append(("FP8 gradient compression (training.grad_comm_dtype: fp8)", "dp",
                    upd("training", grad_comm_dtype="fp8"), cluster))
    if not cluster.fabric.transport.rdma:
        speed = rdma_nic_gbit(cluster)
        out.append((f"an RDMA fabric: {speed:g}G InfiniBand NICs instead of "
                    f"{cluster.compute_nics.speed_bytes_s / units.Gbit:g}G {cluster.fabric.transport.name}", "fabric",
                    w, with_transport(cluster, "infiniband", speed)))
    if p.ep > 1 and p.tp * p.ep > dom and dom % p.tp == 0 and dom // p.tp > 1 and m.moe is not None:
        ep = dom // p.tp
        if m.moe.experts % ep == 0 and p.dp % ep == 0:
            out.append((f"keep EP in the NVLink domain: ep {ep} (tp {p.tp} x ep {ep} = {dom} GPUs)", "ep",
                        upd("parallel", ep=ep), cluster))
    if m.moe is not None and not o.ep_comm and w.micro_batches >= 2 and (p.ep > 1 or p.tp > 1):
        out.append(("overlap one micro-batch's token dispatch with another's layer compute (overlap.ep_comm: true; "
                    "DualPipe, Megatron-Core >= v0.14 --overlap-moe-expert-parallel-comm)", "ep",
                    upd("overlap", ep_comm=True), cluster))
    if p.pp > 1:
        out += _pipeline(w, cluster, upd)
    if t.global_batch % (2 * t.micro_batch * p.dp) == 0:
        out.append((f"a larger micro-batch (training.micro_batch: {2 * t.micro_batch})", "compute",
                    upd("training", micro_batch=2 * t.micro_batch), cluster))
    if any(r > 1 for r in cluster.fabric.oversubscription):
        fab = replace(cluster.fabric, oversubscription=(1.0,) * len(cluster.fabric.oversubscription))
        out.append(("a non-blocking fabric (oversubscription 1:1)", "fabric", w, replace(cluster, fabric=fab)))
    return out


def _pipeline(w: Workload, cluster: Cluster, upd: Callable[..., Workload]) -> list[Candidate]:
    """What shortens a pipeline's bubble (p-1 stage times over m micro-batches, divided by v virtual stages in
    interleaved 1F1B: Narayanan et al., SC'21, sec. 2.2) and its send/recv."""
    p, t, o = w.parallel, w.training, w.overlap
    out: list[Candidate] = []
    if p.vp == 1:
        out.append(("an interleaved pipeline: 2 virtual stages per rank (parallel.vp: 2), a bubble half as long",
                    "pp_bubble", upd("parallel", vp=2), cluster))
    if t.micro_batch > 1 and t.micro_batch % 2 == 0:
        out.append((f"more micro-batches per pipeline: training.micro_batch {t.micro_batch // 2} at the same global "
                    "batch, a shorter bubble", "pp_bubble", upd("training", micro_batch=t.micro_batch // 2), cluster))
    if p.pp % 2 == 0:
        out.append((f"fewer pipeline stages: pp {p.pp // 2}, dp {p.dp * 2}", "pp_bubble",
                    upd("parallel", pp=p.pp // 2, dp=p.dp * 2, vp=1, first_stage_layers=None,
                        last_stage_layers=None), cluster))
    if not o.pp_comm and p.vp > 1:  # Megatron-Core overlaps the PP send/recv only in the interleaved schedule
        out.append(("overlap the PP send/recv with compute (overlap.pp_comm: true)", "pp", upd("overlap", pp_comm=True),
                    cluster))
    return out


BUCKET_FACTORS = (0.25, 0.5, 2.0, 4.0)  # gradient bucket sizes tried, relative to the stack's


def _buckets(w: Workload, cluster: Cluster) -> list[Candidate]:
    """Other gradient bucket sizes for a stack that buckets its DP reduction (ZeRO 0-2; not ZeRO-2 per FSDP unit, not
    an unbucketed reduction): :data:`BUCKET_FACTORS` x the current bucket, in parameters."""
    p, st = w.parallel, w.stack
    f = st.fields
    per_unit = p.zero == 2 and f.sharded_unit == "layer"
    if p.dp_shards == 1 or p.zero >= 3 or per_unit or not (w.overlap.grad_reduce or f.buckets_without_overlap):
        return []
    now = st.grad_bucket_params(p.dp_shards, PRECISION_BYTES[w.training.grad_comm_dtype])
    out: list[Candidate] = []
    for k in BUCKET_FACTORS:
        size = round(now * k)
        changed = st.with_fields(grad_bucket_params=float(size), grad_bucket_params_per_dp=0.0, grad_bucket_bytes=None)
        out.append((f"DP gradient buckets of {size / 1e6:.3g}M parameters instead of {now / 1e6:.3g}M (stack: "
                    f"{{name: {st.name}, grad_bucket_params: {size:.4g}, grad_bucket_params_per_dp: 0}})", "dp",
                    replace(w, stack=changed), cluster))
    return out


def _storage(w: Workload) -> list[tuple[str, Workload]]:
    """What shortens the storage's part of a step: the data stall and the checkpoint's time per step."""
    out: list[tuple[str, Workload]] = []
    if w.data is not None and w.data.layout == "files":
        out.append(("the dataset in shards instead of small files (data.layout: shards; slowlink reshard)",
                    replace(w, data=replace(w.data, layout="shards"))))
    if w.checkpoint is not None and w.checkpoint.mode == "sync":
        out.append(("asynchronous checkpoints (checkpoint.mode: async; torch.distributed.checkpoint.async_save)",
                    replace(w, checkpoint=replace(w.checkpoint, mode="async"))))
    return out


def advise(w: Workload, cluster: Cluster, base: StepResult, cost: CommCost | None = None,
           *, check_memory: bool = True, bottleneck: str | None = None) -> list[Advice]:
    """Every candidate change that fits and saves more than MIN_GAIN of ``base``'s step (with the storage's part
    where the cluster has storage), those that answer ``bottleneck`` (default: the step's) first, each group best
    first (``w`` resolved on ``cluster``: :func:`~slowlink.workload.step.fit_dp`)."""
    from slowlink.storage.plan import plan_storage

    stored = cluster.storage is not None and (w.data is not None or w.checkpoint is not None)
    base_s = _with_storage(plan_storage(w, cluster, base)) if stored else base.step_time_s

    def checked(c: Candidate) -> Advice | None:
        words, answers, w2, c2 = c
        try:
            r = plan(w2, c2, cost if c2 is cluster else None, check_memory=check_memory)
            t = _with_storage(plan_storage(w2, c2, r)) if stored else r.step_time_s
        except SlowlinkError:
            return None  # does not fit or breaks a divisibility rule: not advice
        return Advice(words, t, 1.0 - t / base_s, answers, base_s, stored)

    out = [a for a in map(checked, _candidates(w, cluster)) if a is not None and a.gain > MIN_GAIN]
    sizes = [a for a in map(checked, _buckets(w, cluster)) if a is not None and a.gain > MIN_GAIN]
    out += sorted(sizes, key=lambda a: -a.gain)[:1]  # one bucket size: the best
    for words, w2 in _storage(w) if stored else []:
        try:
            t = _with_storage(plan_storage(w2, cluster, base))
        except SlowlinkError:
            continue
        if (gain := 1.0 - t / base_s) > MIN_GAIN:
            out.append(Advice(words, t, gain, "storage", base_s, stored))
    first = bottleneck if bottleneck is not None else base.bottleneck_dim
    return sorted(out, key=lambda a: (not _answers(a.answers, first), -a.gain))


def _answers(answers: str, bottleneck: str) -> bool:
    """Whether advice that ``answers`` one wait shortens ``bottleneck``: its own, or a faster fabric for any
    communication (the scale-out fabric carries every dimension that crosses it)."""
    return answers == bottleneck or (answers == "fabric" and bottleneck in DIM_WORDS)


def _with_storage(s: StoragePlan) -> float:
    """The step as it runs with its storage: the data stall, and the checkpoint's stop per step."""
    return s.run_step_s + (s.checkpoint_overhead_s or 0.0)
