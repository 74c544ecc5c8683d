"""What the cluster's degraded parts cost a training step: the job planned twice (as built and with every
part at its datasheet rate), the difference per parallel dimension, and each part alone.

Both fidelities price the same parts: the analytical model through each communicator's
:class:`~slowlink.topology.degraded.Penalty`, the flow simulator on the degraded graph
(:func:`slowlink.topology.degraded.apply`). ``pays`` is the dimension whose exposed time grew the most (or
``compute`` when a slow GPU costs more): every rank waits for the slowest at each synchronisation, so one
part slows the whole job by what it costs the dimension whose collectives cross it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from slowlink.sim.fidelity import CollectiveQuery, check_fidelity, comm_cost, predict_collective
from slowlink.spec.cluster import Cluster
from slowlink.spec.degraded import Degraded, resolve_degraded
from slowlink.spec.workload import Workload
from slowlink.straggler.sweep import PlanJitter, plan_jitter
from slowlink.topology.build import build
from slowlink.workload.step import StepResult, check_plan, plan

PAYS_TIE = 0.05  # dimensions whose added exposed time is within 5% of the largest pay together


@dataclass(frozen=True)
class PartCost:
    """One degraded part alone: the step time with only it, and its slowdown over the healthy step."""

    part: str
    step_time_s: float
    slowdown: float

    def to_json(self) -> dict[str, Any]:
        return {"part": self.part, "step_time_s": self.step_time_s, "slowdown": self.slowdown}


@dataclass(frozen=True)
class CollectivePartCost:
    """One degraded part alone on one collective: its time with only that part, and the slowdown over the
    healthy cluster's time."""

    part: str
    time_s: float
    slowdown: float

    def to_json(self) -> dict[str, Any]:
        return {"part": self.part, "time_s": self.time_s, "slowdown": self.slowdown}


@dataclass(frozen=True)
class DegradedCost:
    """The healthy and the degraded step of one job, per dimension, with each part's own cost."""

    cluster: str
    workload: str
    fidelity: str
    healthy: StepResult
    degraded: StepResult
    parts: tuple[PartCost, ...]
    unpriced: tuple[str, ...] = ()  # parts this fidelity does not price (fabric cables: flow only)

    @property
    def slowdown(self) -> float:
        """Degraded step / healthy step - 1."""
        return self.degraded.step_time_s / self.healthy.step_time_s - 1.0

    @property
    def exposed_delta_s(self) -> dict[str, float]:
        """Per dimension, how much more of its time is exposed in the degraded step (plus ``compute``)."""
        out = {k: self.degraded.comm_s[k] - self.healthy.comm_s.get(k, 0.0) for k in self.degraded.comm_s}
        out["compute"] = self.degraded.compute_s - self.healthy.compute_s
        return out

    @property
    def total_delta_s(self) -> dict[str, float]:
        """Per dimension, how much longer its collectives take in all (exposed or hidden behind compute)."""
        return {k: self.degraded.comm_total_s[k] - self.healthy.comm_total_s.get(k, 0.0)
                for k in self.degraded.comm_total_s}

    @property
    def pays(self) -> str:
        """The dimension (or compute) whose exposed time grew the most, with any other within
        ``PAYS_TIE`` of it joined by '+' (e.g. 'dp+ep'); 'none' when nothing grew."""
        delta = self.exposed_delta_s
        top = max(delta.values())
        if top <= 0:
            return "none"
        return "+".join(k for k in sorted(delta, key=lambda k: -delta[k]) if delta[k] >= (1 - PAYS_TIE) * top)

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "workload": self.workload, "fidelity": self.fidelity,
                "healthy_step_s": self.healthy.step_time_s, "degraded_step_s": self.degraded.step_time_s,
                "slowdown": self.slowdown, "pays": self.pays, "exposed_delta_s": self.exposed_delta_s,
                "total_delta_s": self.total_delta_s, "degraded_by": [p.to_json() for p in self.parts],
                "unpriced": list(self.unpriced)}


def healthy(cluster: Cluster) -> Cluster:
    """``cluster`` with every part at its datasheet rate."""
    return replace(cluster, degraded=Degraded())


def _step(w: Workload, cluster: Cluster, fidelity: str) -> StepResult:
    return plan(w, cluster, comm_cost(fidelity, cluster))


def degraded_cost(w: Workload, cluster: Cluster, fidelity: str = "analytical",
                  step: StepResult | None = None) -> DegradedCost:
    """Plan ``w`` on ``cluster`` healthy at ``fidelity``, and with each degraded part alone (``degraded_by``; one
    plan per part); ``step`` is the cluster's own step as built (planned here when not given)."""
    check_fidelity(fidelity)
    if cluster.degraded.link_rate:
        build(cluster)  # a fabric link name the graph does not have is an error at either fidelity
    base = _step(w, healthy(cluster), fidelity)
    full = step if step is not None else _step(w, cluster, fidelity)
    parts = []
    gpn = cluster.gpus_per_node
    for spec_part, name in zip(cluster.degraded_parts, cluster.degraded.names, strict=True):
        alone = replace(cluster, degraded=resolve_degraded([spec_part], gpn))
        t = full.step_time_s if len(cluster.degraded_parts) == 1 else _step(w, alone, fidelity).step_time_s
        parts.append(PartCost(name, t, t / base.step_time_s - 1.0))
    unpriced = tuple(f"link {name}" for name in cluster.degraded.link_rate) if fidelity == "analytical" else ()
    return DegradedCost(cluster.name, w.name, fidelity, base, full, tuple(parts), unpriced)


@dataclass(frozen=True)
class PlanStragglers:
    """What a plan adds on a cluster with degraded parts (their cost, each alone) or ``variability:`` (the
    expected step under that jitter); empty on a uniform cluster."""

    degraded: DegradedCost | None = None
    jitter: PlanJitter | None = None

    def to_json(self) -> dict[str, object]:
        """The keys ``plan --json`` adds: ``healthy_step_s``, ``degraded_pays``, ``degraded_by``, ``jitter``."""
        out: dict[str, object] = {}
        if self.degraded is not None:
            c = self.degraded
            out |= {"healthy_step_s": c.healthy.step_time_s, "degraded_pays": c.pays,
                    "degraded_by": [p.to_json() for p in c.parts]}
        if self.jitter is not None:
            out["jitter"] = self.jitter.to_json()
        return out


def plan_stragglers(w: Workload, cluster: Cluster, fidelity: str, result: StepResult) -> PlanStragglers:
    """The degraded parts' cost and the jitter of the plan ``result`` of ``w`` on ``cluster``."""
    cost = degraded_cost(w, cluster, fidelity, result) if cluster.degraded else None
    v = cluster.variability
    jitter = None if v is None else plan_jitter(w, result, check_plan(w, cluster), v.compute_cv, v.network_cv,
                                                v.distribution, cluster.gpus)
    return PlanStragglers(cost, jitter)


def collective_degraded_by(cluster: Cluster, query: CollectiveQuery) -> list[list[CollectivePartCost]]:
    """For ``collective --json``: per size, each degraded part alone against the healthy cluster."""
    base = predict_collective(healthy(cluster), query)
    gpn = cluster.gpus_per_node
    per_part = [predict_collective(replace(cluster, degraded=resolve_degraded([p], gpn)), query)
                for p in cluster.degraded_parts]
    return [[CollectivePartCost(name, preds[i].time_s, preds[i].time_s / b.time_s - 1.0)
             for name, preds in zip(cluster.degraded.names, per_part, strict=True)]
            for i, b in enumerate(base)]
