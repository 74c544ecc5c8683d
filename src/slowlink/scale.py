"""Scaling: the same workload on 1..N nodes, dp adapted to the node count (tp, pp, cp fixed), each size assessed
by the whole chain (:func:`slowlink.assess.assess`: the step with its data stall, ETTR and cost).

Modes: ``global-batch`` keeps the global batch (fewer micro-batches per rank as dp grows);
``per-gpu-batch`` keeps sequences per data-parallel rank (the global batch grows with dp).
Scaling efficiency = per-GPU tokens/s at a size / per-GPU tokens/s at the smallest size.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from slowlink.assess import Assessment, assess
from slowlink.errors import InfeasiblePlan, SlowlinkError, SpecError
from slowlink.spec.cluster import Cluster
from slowlink.spec.workload import Parallel, Workload
from slowlink.workload.step import StepResult, fit_dp

if TYPE_CHECKING:
    from slowlink.progress import OnStep

MODES = ("global-batch", "per-gpu-batch")


@dataclass(frozen=True)
class ScalePoint:
    nodes: int
    gpus: int
    global_batch: int
    assessment: Assessment
    tokens_per_s_per_gpu: float  # with the data stall
    efficiency: float

    @property
    def result(self) -> StepResult:
        """The step model's answer at this size."""
        return self.assessment.step

    def to_json(self) -> dict[str, object]:
        """One point of ``slowlink scale --json``: the size, its per-GPU throughput and efficiency, the step,
        its data stall and ETTR, and what could not be priced."""
        a = self.assessment
        return {"nodes": self.nodes, "gpus": self.gpus, "global_batch": self.global_batch,
                "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu, "scaling_efficiency": self.efficiency,
                **a.step.to_json(), "data_stall_s": a.data_stall_s, "ettr": a.ettr,
                "unpriced": [u.to_json() for u in a.unpriced]}


@dataclass(frozen=True)
class Refused:
    """A node count the workload cannot run at, and why (the refusal's message and rule)."""

    nodes: int
    gpus: int
    why: str
    rule: str

    @property
    def label(self) -> str:
        return f"{self.nodes} node{'s' if self.nodes != 1 else ''}"

    def to_json(self) -> dict[str, object]:
        return {"nodes": self.nodes, "gpus": self.gpus, "infeasible": self.why, "rule": self.rule}


@dataclass(frozen=True)
class Scaling:
    """The sizes that run (efficiency against the smallest of them) and those refused, each with its reason."""

    points: tuple[ScalePoint, ...]
    refused: tuple[Refused, ...] = ()


# Refusals that belong to one size (it does not fit, divide or cable), not to the workload: the table goes on.
SIZE_RULES = ("memory_fits", "batch_divides", "interleave_divides_batch", "ep_overlap_pairs", "ep_divides_dp",
              "parallel_divides", "gpus_divide", "fabric_fits")


def scale(w: Workload, cluster: Cluster, nodes: list[int], mode: str = "global-batch",
          fidelity: str = "analytical",
          on_step: OnStep | None = None) -> Scaling:
    """Assess ``w`` on ``cluster`` resized to each node count; dp = gpus / (tp * pp * cp), collectives priced at
    ``fidelity``; ``on_step`` is told as each node count begins. A size that cannot run is refused with its
    reason and the others go on; when none can run, the refusal lists every size."""
    if mode not in MODES:
        raise SpecError(f"mode ({mode!r}) must be one of {', '.join(MODES)}")
    if not nodes or min(nodes) < 1:
        raise SpecError(f"nodes ({nodes}) must be a non-empty list of counts >= 1")
    p = fit_dp(w, cluster).parallel
    per_rank = w.training.global_batch // p.dp
    points: list[ScalePoint] = []
    refused: list[Refused] = []
    for n in sorted(set(nodes)):
        if on_step is not None:
            on_step(f"{n} nodes")
        c = replace(cluster, nodes=n, sites=None if cluster.sites is None else cluster.sites.on_nodes(n))
        try:
            points.append(_point(w, c, p, per_rank, mode, fidelity, points[0] if points else None))
        except SlowlinkError as exc:
            if exc.rule not in SIZE_RULES:
                raise
            refused.append(Refused(n, c.gpus, str(exc), exc.rule))
    if not points:
        raise InfeasiblePlan("no node count can run this workload:\n" + "\n".join(
            f"  {r.label}: {r.why}" for r in refused), rule=refused[0].rule)
    return Scaling(tuple(points), tuple(refused))


def _point(w: Workload, c: Cluster, p: Parallel, per_rank: int, mode: str, fidelity: str,
           first: ScalePoint | None) -> ScalePoint:
    model_par = p.model_parallel
    if c.gpus % model_par:
        raise InfeasiblePlan(f"its {c.gpus} GPUs are not divisible by tp*pp*cp ({model_par})", rule="gpus_divide")
    dp = c.gpus // model_par
    gb = w.training.global_batch if mode == "global-batch" else per_rank * dp
    wn = replace(w, parallel=replace(p, dp=dp, ep=min(p.ep, dp)), training=replace(w.training, global_batch=gb))
    a = assess(wn, c, fidelity=fidelity, full=False)
    tpg = a.tokens_per_s / c.gpus
    return ScalePoint(c.nodes, c.gpus, gb, a, tpg, tpg / first.tokens_per_s_per_gpu if first else 1.0)
