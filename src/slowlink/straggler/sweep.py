"""Expected step time against job size under per-rank jitter: closed form and Monte Carlo side by side.

A planned step (:func:`slowlink.workload.step.plan`) gives one rank's mean compute and exposed
communication; :func:`sync_points` counts the synchronisations that split it; :func:`jitter_sweep` prices
the same per-rank step at each GPU count (weak scaling: the per-rank work stays, only the number of ranks
waited for grows) with :mod:`slowlink.straggler.jitter`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from slowlink.errors import SpecError, field_error
from slowlink.spec.workload import Workload
from slowlink.straggler.jitter import Interval, equal_intervals, expected_step_s, monte_carlo_step_s
from slowlink.workload.step import StepResult

DEFAULT_GPUS = (8, 64, 512, 4096, 16384)
DEFAULT_CVS = (0.01, 0.02, 0.05)


@dataclass(frozen=True)
class JitterPoint:
    """One job size and CV: the mean step (no jitter), the closed form and the Monte Carlo, seconds."""

    gpus: int
    compute_cv: float
    network_cv: float
    mean_step_s: float
    closed_form_s: float
    monte_carlo_s: float
    monte_carlo_stderr_s: float

    @property
    def loss(self) -> float:
        """What waiting for the slowest costs: closed form / mean step - 1."""
        return self.closed_form_s / self.mean_step_s - 1.0

    @property
    def error(self) -> float:
        """Closed form against the Monte Carlo: closed / MC - 1."""
        return self.closed_form_s / self.monte_carlo_s - 1.0

    def to_json(self) -> dict[str, Any]:
        return {"gpus": self.gpus, "compute_cv": self.compute_cv, "network_cv": self.network_cv,
                "mean_step_s": self.mean_step_s, "closed_form_s": self.closed_form_s,
                "monte_carlo_s": self.monte_carlo_s, "monte_carlo_stderr_s": self.monte_carlo_stderr_s,
                "loss": self.loss, "error": self.error}


def sync_points(w: Workload, micro_batches: int) -> int:
    """Synchronisations per step on one rank's critical path: a forward and a backward pipeline hand-off
    per micro-batch when pp > 1, and the gradient reduction (one per step)."""
    return (2 * micro_batches if w.parallel.pp > 1 else 0) + 1


def step_intervals(result: StepResult, syncs: int) -> tuple[list[Interval], float]:
    """The planned step as ``syncs`` equal intervals of compute and exposed communication, and the time
    charged without jitter (bubble: idle; optimizer: a local kernel after the last synchronisation)."""
    fixed = result.bubble_s + result.optimizer_s
    work = result.step_time_s - fixed
    comm = min(result.exposed_comm_s, work)
    return equal_intervals(work - comm, comm, syncs), fixed


def jitter_sweep(result: StepResult, syncs: int, gpus: tuple[int, ...] = DEFAULT_GPUS,
                 cvs: tuple[float, ...] = DEFAULT_CVS, network_cv: float = 0.0, distribution: str = "normal",
                 trials: int = 64, seed: int = 0) -> list[JitterPoint]:
    """The planned step at each GPU count and compute CV: closed form and a seeded Monte Carlo (one
    ``numpy`` generator seeded with ``seed``, shared by the whole sweep in order).

    The step is split by :func:`step_intervals`.
    """
    if not gpus or min(gpus) < 1:
        raise SpecError(field_error("--gpus", ",".join(map(str, gpus)), "must be one or more counts >= 1"))
    intervals, fixed = step_intervals(result, syncs)
    rng = np.random.default_rng(seed)
    out = []
    for n in gpus:
        for cv in cvs:
            cf = expected_step_s(intervals, n, cv, network_cv, distribution) + fixed
            mc, se = monte_carlo_step_s(intervals, n, cv, network_cv, distribution, trials=trials, rng=rng)
            out.append(JitterPoint(n, cv, network_cv, result.step_time_s, cf, mc + fixed, se))
    return out


@dataclass(frozen=True)
class PlanJitter:
    """The expected step of a plan over ``gpus`` ranks under the cluster's ``variability:``, by the closed form
    (no Monte Carlo), with the synchronisations it assumes and the loss against the jitter-free step."""

    expected_step_s: float
    loss: float
    syncs: int
    compute_cv: float
    network_cv: float
    distribution: str
    gpus: int

    def to_json(self) -> dict[str, object]:
        """``plan --json``'s ``jitter`` object."""
        return {"expected_step_s": self.expected_step_s, "loss": self.loss, "syncs": self.syncs,
                "compute_cv": self.compute_cv, "network_cv": self.network_cv, "distribution": self.distribution,
                "gpus": self.gpus}


def plan_jitter(w: Workload, result: StepResult, micro_batches: int, compute_cv: float, network_cv: float,
                distribution: str = "normal", gpus: int = 1) -> PlanJitter:
    """What a plan's step becomes under per-rank jitter (:class:`PlanJitter`)."""
    syncs = sync_points(w, micro_batches)
    intervals, fixed = step_intervals(result, syncs)
    expected = expected_step_s(intervals, gpus, compute_cv, network_cv, distribution) + fixed
    return PlanJitter(expected, expected / result.step_time_s - 1.0, syncs, compute_cv, network_cv, distribution,
                      gpus)
