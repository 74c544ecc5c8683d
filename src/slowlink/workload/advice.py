"""Concrete advice for a plan, each piece checked by re-running the step model with the change.

Candidates (only those that apply): keep TP inside the scale-up domain, turn on the overlaps, compressed
gradients (BF16, FP8), a larger micro-batch, a non-blocking fabric, an RDMA fabric. A change is kept
when it fits in memory and cuts the step by more than MIN_GAIN; the list is sorted by gain.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from slowlink import units
from slowlink.errors import SlowlinkError
from slowlink.spec.cluster import Cluster, with_transport
from slowlink.spec.workload import Workload
from slowlink.workload.comm import CommCost
from slowlink.workload.step import StepResult, plan

MIN_GAIN = 0.01  # a change must save 1% of the step to be worth saying


@dataclass(frozen=True)
class Advice:
    change: str
    step_time_s: float
    gain: float  # share of the current step saved

    def to_json(self) -> dict[str, object]:
        return {"change": self.change, "step_time_s": self.step_time_s, "gain": self.gain}


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


def _candidates(w: Workload, cluster: Cluster) -> list[tuple[str, Workload, Cluster]]:
    p, t, o, m = w.parallel, w.training, w.overlap, w.model
    out: list[tuple[str, Workload, Cluster]] = []

    def upd(section: str, **kv: object) -> Workload:
        return replace(w, **{section: replace(getattr(w, section), **kv)})

    dom = cluster.scale_up.domain_gpus
    if p.tp > dom and p.tp % dom == 0:
        out.append((f"keep TP in the NVLink domain: tp {dom}, dp {p.dp * p.tp // dom}",
                    upd("parallel", tp=dom, dp=p.dp * p.tp // dom), cluster))
    for key, words in (("grad_reduce", "overlap the DP gradient reduction with the backward pass"),
                       ("param_gather", "overlap the parameter all-gather with the forward pass")):
        if not getattr(o, key):
            out.append((f"{words} (overlap.{key}: true)", upd("overlap", **{key: True}), cluster))
    if not o.tp_comm and p.tp > 1:  # userbuffers overlap needs sequence parallelism (workload.tp_overlap)
        tp_ov = replace(upd("overlap", tp_comm=True), parallel=replace(p, sequence_parallel=True))
        out.append(("overlap TP collectives with the GEMMs (userbuffers"
                    + (")" if p.sequence_parallel else "; it needs sequence parallelism: parallel.sequence_parallel: "
                       "true") + ", overlap.tp_comm: true)", tp_ov, cluster))
    if t.grad_comm_dtype == "fp32":
        out.append(("BF16 gradients (training.grad_comm_dtype: bf16)", upd("training", grad_comm_dtype="bf16"),
                    cluster))
    if t.grad_comm_dtype == "bf16" and p.dp_shards > 1:
        out.append(("FP8 gradient compression (training.grad_comm_dtype: fp8)",
                    upd("training", grad_comm_dtype="fp8"), cluster))
    if not cluster.fabric.transport.rdma:
        speed = rdma_nic_gbit(cluster)
        out.append((f"an RDMA fabric: {speed:g}G InfiniBand NICs instead of "
                    f"{cluster.compute_nics.speed_bytes_s / units.Gbit:g}G {cluster.fabric.transport.name}",
                    w, with_transport(cluster, "infiniband", speed)))
    if p.ep > 1 and p.tp * p.ep > dom and dom % p.tp == 0 and dom // p.tp > 1 and m.moe is not None:
        ep = dom // p.tp
        if m.moe.experts % ep == 0 and p.dp % ep == 0:
            out.append((f"keep EP in the NVLink domain: ep {ep} (tp {p.tp} x ep {ep} = {dom} GPUs)",
                        upd("parallel", ep=ep), cluster))
    if t.global_batch % (2 * t.micro_batch * p.dp) == 0:
        out.append((f"a larger micro-batch (training.micro_batch: {2 * t.micro_batch})",
                    upd("training", micro_batch=2 * t.micro_batch), cluster))
    if any(r > 1 for r in cluster.fabric.oversubscription):
        fab = replace(cluster.fabric, oversubscription=(1.0,) * len(cluster.fabric.oversubscription))
        out.append(("a non-blocking fabric (oversubscription 1:1)", w, replace(cluster, fabric=fab)))
    return out


def advise(w: Workload, cluster: Cluster, base: StepResult, cost: CommCost | None = None,
           *, check_memory: bool = True) -> list[Advice]:
    """Every candidate change that fits and saves more than MIN_GAIN of ``base``'s step, best first (``w`` resolved
    on ``cluster``: :func:`~slowlink.workload.step.fit_dp`)."""
    out: list[Advice] = []
    for words, w2, c2 in _candidates(w, cluster):
        try:
            r = plan(w2, c2, cost if c2 is cluster else None, check_memory=check_memory)
        except SlowlinkError:
            continue  # does not fit or breaks a divisibility rule: not advice
        gain = 1.0 - r.step_time_s / base.step_time_s
        if gain > MIN_GAIN:
            out.append(Advice(words, r.step_time_s, gain))
    return sorted(out, key=lambda a: -a.gain)
