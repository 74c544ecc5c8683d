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
from slowlink.errors import InfeasiblePlan, SpecError
from slowlink.spec.cluster import Cluster
from slowlink.spec.workload import Workload
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


def scale(w: Workload, cluster: Cluster, nodes: list[int], mode: str = "global-batch",
          fidelity: str = "analytical",
          on_step: OnStep | None = None) -> list[ScalePoint]:
    """Assess ``w`` on ``cluster`` resized to each node count; dp = gpus / (tp * pp * cp), collectives priced at
    ``fidelity``; ``on_step`` is told as each node count begins."""
    if mode not in MODES:
        raise SpecError(f"mode ({mode!r}) must be one of {', '.join(MODES)}")
    if not nodes or min(nodes) < 1:
        raise SpecError(f"nodes ({nodes}) must be a non-empty list of counts >= 1")
    p = fit_dp(w, cluster).parallel
    per_rank = w.training.global_batch // p.dp
    points: list[ScalePoint] = []
    for n in sorted(set(nodes)):
        if on_step is not None:
            on_step(f"{n} nodes")
        c = replace(cluster, nodes=n)
        model_par = p.model_parallel
        if c.gpus % model_par:
            raise InfeasiblePlan(f"--nodes ({n}): {c.gpus} GPUs not divisible by tp*pp*cp ({model_par})")
        dp = c.gpus // model_par
        gb = w.training.global_batch if mode == "global-batch" else per_rank * dp
        wn = replace(w, parallel=replace(p, dp=dp, ep=min(p.ep, dp)), training=replace(w.training, global_batch=gb))
        a = assess(wn, c, fidelity=fidelity, full=False)
        tpg = a.tokens_per_s / c.gpus
        eff = tpg / points[0].tokens_per_s_per_gpu if points else 1.0
        points.append(ScalePoint(n, c.gpus, gb, a, tpg, eff))
    return points
