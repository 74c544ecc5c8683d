"""Typed results of a shared-cluster simulation: one :class:`PolicyResult` per policy, and the whole run.

Utilisation, allocation and fragmentation are time averages over the makespan (first arrival to last
finish, or to the deadlock), as shares of the cluster's GPUs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


def _num(x: float) -> float | None:
    """A number for JSON: None where there is none (no job of that kind finished: NaN)."""
    return None if math.isnan(x) else x


@dataclass(frozen=True)
class Holding:
    """A job caught in a deadlock: the GPUs it holds and the GPUs it needs."""

    job: str
    holds: int
    needs: int


@dataclass(frozen=True)
class Deadlock:
    """Distributed jobs that each hold part of their GPUs and wait for GPUs another of them holds."""

    time_s: float
    cycle: tuple[Holding, ...]

    def describe(self) -> str:
        """``j1 (holds 4/6) waits for j2 (holds 4/6) waits for j1``."""
        names = [f"{h.job} (holds {h.holds}/{h.needs} GPUs)" for h in self.cycle]
        return " waits for ".join([*names, self.cycle[0].job])

    def to_json(self) -> dict[str, Any]:
        return {"time_s": self.time_s, "cycle": [h.job for h in self.cycle],
                "holding": {h.job: {"holds": h.holds, "needs": h.needs} for h in self.cycle},
                "description": self.describe()}


@dataclass(frozen=True)
class KindStats:
    """Jobs of one kind under one policy."""

    kind: str
    jobs: int
    finished: int
    mean_queue_s: float
    p95_jct_s: float
    run_slowdown: float  # mean (finish - start) / duration alone: what sharing costs while it runs
    jct_slowdown: float  # mean (finish - arrival) / duration alone: with the wait


@dataclass(frozen=True)
class PolicyResult:
    """One policy over the scenario's jobs."""

    name: str
    scheduler: str
    slicing: str
    jobs: int
    finished: int
    makespan_s: float
    utilisation: float  # GPU compute doing work / GPUs
    allocated: float  # GPUs reserved by jobs (running or holding part of their gang) / GPUs
    fragmentation: float  # GPUs left free while jobs wait, unusable by any of them / GPUs
    held_idle: float  # GPUs held by jobs still waiting for the rest of their gang / GPUs
    mean_queue_s: float
    p50_queue_s: float
    p95_queue_s: float
    p99_queue_s: float
    p95_jct_s: float
    by_kind: tuple[KindStats, ...]
    deadlocks: tuple[Deadlock, ...]
    allocated_at_last_arrival: float = math.nan  # GPUs allocated once the last job arrived / GPUs (NaN: never)
    # (from time s, allocated share, utilisation, waiting jobs) of every interval; empty unless asked for
    timeline: tuple[tuple[float, float, float, int], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "scheduler": self.scheduler, "slicing": self.slicing, "jobs": self.jobs,
                "finished": self.finished, "makespan_s": self.makespan_s, "utilisation": self.utilisation,
                "allocated": self.allocated, "fragmentation": self.fragmentation, "held_idle": self.held_idle,
                "allocated_at_last_arrival": _num(self.allocated_at_last_arrival),
                "deadlocks": [d.to_json() for d in self.deadlocks], "mean_queue_s": _num(self.mean_queue_s),
                "p50_queue_s": _num(self.p50_queue_s), "p95_queue_s": _num(self.p95_queue_s),
                "p99_queue_s": _num(self.p99_queue_s), "p95_jct_s": _num(self.p95_jct_s),
                "slowdown_by_kind": {k.kind: _num(k.run_slowdown) for k in self.by_kind},
                "jct_slowdown_by_kind": {k.kind: _num(k.jct_slowdown) for k in self.by_kind},
                "by_kind": {k.kind: {"jobs": k.jobs, "finished": k.finished, "mean_queue_s": _num(k.mean_queue_s),
                                     "p95_jct_s": _num(k.p95_jct_s)} for k in self.by_kind}}


@dataclass(frozen=True)
class ShareResult:
    """Every policy of one scenario."""

    name: str
    gpus: int
    jobs: int
    policies: tuple[PolicyResult, ...]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "gpus": self.gpus, "jobs": self.jobs,
                "policies": {p.name: p.to_json() for p in self.policies}}
