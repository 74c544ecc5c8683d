"""Goodput and time-to-train: the step model's step time, the storage model's checkpoint and restore, and
the failure model's MTTF joined into the effective training time ratio and the days and GPU-hours to train
a token budget.

  steps      = ceil(tokens / (global_batch x seq_len))          (or given)
  step       = the step model's step time + the storage model's data stall per step
  useful     = steps x step
  wall       = useful / ETTR                                      (ETTR: slowlink.reliability.ettr)
  GPU-hours  = wall x job GPUs / 3600
The losses are the expected seconds of each cause over the run (they sum to ``wall - useful``), beside the
parts of the step itself (pipeline bubble, exposed communication, data stall) x steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from slowlink import units
from slowlink.errors import SpecError
from slowlink.reliability.ettr import (
    EttrInputs,
    SegmentTimes,
    best_interval_s,
    daly_interval_s,
    ettr_closed_form,
    ettr_monte_carlo,
    segment_times,
    young_interval_s,
)
from slowlink.reliability.failures import FailureModel, failure_model
from slowlink.reliability.recovery import CheckpointTimes, RecoveryCost, checkpoint_times
from slowlink.spec.cluster import Cluster
from slowlink.spec.workload import Workload

if TYPE_CHECKING:
    from slowlink.storage.plan import StoragePlan
    from slowlink.workload.step import StepResult

NO_BUDGET = ("training.tokens (None): give the run's token budget in the workload (e.g. tokens: 15T), or --tokens / "
             "--steps")
SWEEP_GPUS = (8, 64, 512, 2048, 8192, 16384, 32768, 131072)  # job sizes of the MTTF/ETTR sweep


@dataclass(frozen=True)
class SizePoint:
    gpus: int
    mttf_h: float
    best_interval_s: float
    ettr: float

    def to_json(self) -> dict[str, float]:
        return {"gpus": self.gpus, "mttf_h": self.mttf_h, "best_checkpoint_interval_s": self.best_interval_s,
                "ettr": self.ettr}


@dataclass(frozen=True)
class Goodput:
    """The reliability model of one workload on one cluster (``to_json`` keys are a contract)."""

    gpus: int
    mttf_h: float
    step_s: float
    steps: int
    tokens: float
    interval_s: float
    interval_source: str
    young_s: float
    daly_s: float
    exact_best_s: float
    ettr: float
    ettr_mc: float
    ettr_at_best: float
    recovery: RecoveryCost
    checkpoint: CheckpointTimes
    seg: SegmentTimes
    planned_per_h: float
    step_parts_s: dict[str, float]
    shares: dict[str, float]
    sweep: list[SizePoint] = field(default_factory=list)
    restart_parts: dict[str, float] = field(default_factory=dict)  # the restart model's parts at this size
    restart_override_s: float | None = None  # reliability.restart_overhead_s, which replaces their sum
    site_outages: float | None = None  # the share of time sites' outages leave (None: one site, or not priced)

    @property
    def segments(self) -> float:
        return self.steps * self.step_s / self.seg.useful_s

    @property
    def wall_s(self) -> float:
        return self.steps * self.step_s / self.ettr

    @property
    def expected_failures(self) -> float:
        return self.segments * self.seg.failures

    @property
    def expected_planned(self) -> float:
        return self.segments * self.seg.planned

    def losses_days(self) -> dict[str, float]:
        """Expected days each cause costs over the run: failures (lost work and recovery phases), checkpoints,
        planned interruptions, the step's own data stall, bubble and exposed communication, and across sites
        their outages."""
        n, seg, rec = self.segments, self.seg, self.recovery
        per_fail = seg.failures * n / units.DAY
        k = self.site_outages
        sites = {} if k is None else {"site_outages": self.wall_s * (1 - k) / units.DAY}  # wall - wall x k
        return {
            "failures_lost_work": seg.lost_work_s * n / units.DAY,
            "failures_detect": rec.detect_s * per_fail, "failures_restart": rec.restart_s * per_fail,
            "failures_restore": rec.restore_s * per_fail, "failures_commit_lag": rec.commit_lag_s * per_fail,
            "checkpoints": seg.checkpoint_s * n / units.DAY, "planned_interruptions": seg.planned_s * n / units.DAY,
            **{part: v * self.steps / units.DAY for part, v in self.step_parts_s.items()},
        } | sites

    def with_site_outages(self, share: float) -> Goodput:
        """This goodput with the sites' outages leaving ``share`` of the time (every ETTR x it, a loss of its own;
        ``slowlink.sites.outages``)."""
        return replace(self, ettr=self.ettr * share, ettr_mc=self.ettr_mc * share,
                       ettr_at_best=self.ettr_at_best * share, site_outages=share)

    def to_json(self) -> dict[str, object]:
        return {
            "gpus": self.gpus, "mttf_h": self.mttf_h, "ettr": self.ettr, "ettr_monte_carlo": self.ettr_mc,
            "best_checkpoint_interval_s": self.daly_s, "checkpoint_interval_s": self.interval_s,
            "checkpoint_interval_source": self.interval_source, "young_interval_s": self.young_s,
            "exact_best_interval_s": self.exact_best_s, "ettr_at_best_interval": self.ettr_at_best,
            "expected_interruptions": self.expected_failures + self.expected_planned,
            "expected_failures": self.expected_failures, "expected_planned": self.expected_planned,
            "tokens": self.tokens, "steps": self.steps, "step_time_s": self.step_s,
            "time_to_train_days": self.wall_s / units.DAY, "useful_days": self.steps * self.step_s / units.DAY,
            "gpu_hours": self.wall_s * self.gpus / units.HOUR, "losses": self.losses_days(),
            "recovery": {**self.recovery.to_json(), "restart_parts": self.restart_parts,
                         "restart_source": "model" if self.restart_override_s is None
                         else "reliability.restart_overhead_s"},
            "checkpoint": {"blocking_s": self.checkpoint.blocking_s, "drain_s": self.checkpoint.drain_s,
                           "restore_s": self.checkpoint.restore_s, "mode": self.checkpoint.mode,
                           "source": self.checkpoint.source, "stop_s": self.seg.checkpoint_s},
            "failure_shares": self.shares, "sweep": [p.to_json() for p in self.sweep],
        }


def budget_steps(w: Workload, tokens: float | None, steps: int | None) -> tuple[int, float]:
    """(steps, tokens) of the run: ``--steps``, else ``ceil(tokens / (global_batch x seq_len))`` from
    ``--tokens`` or the workload's ``training.tokens``."""
    per_step = w.tokens_per_step
    if steps is not None:
        return steps, float(steps * per_step)
    t = tokens if tokens is not None else w.training.tokens
    if t is None:
        raise SpecError(NO_BUDGET, rule="budget_given")
    return math.ceil(float(t) / per_step), float(t)


def inputs(fm: FailureModel, gpus: int, gpn: int, tau_s: float, ck: CheckpointTimes, rec: RecoveryCost
           ) -> EttrInputs:
    """The ETTR inputs at interval ``tau_s``: planned interruptions cost a checkpoint, a restart, a restore."""
    return EttrInputs(tau_s, ck.stop_s(tau_s), fm.job_rate_per_h(gpus, gpn) / units.HOUR, rec.total_s,
                      fm.planned_rate_per_h(gpus, gpn) / units.HOUR, rec.restart_s + rec.restore_s + ck.blocking_s)


def size_sweep(fm: FailureModel, gpn: int, ck: CheckpointTimes, step_s: float) -> list[SizePoint]:
    """MTTF and ETTR at the Daly interval for each job size of :data:`SWEEP_GPUS` (same checkpoint costs, the
    restart at each size)."""
    out = []
    for g in (g for g in SWEEP_GPUS if g % gpn == 0):
        rec = RecoveryCost(fm.detect_s(g, gpn), fm.restart_s(g), ck.restore_s, ck.commit_lag_s)
        mttf_s = fm.mttf_h(g, gpn) * units.HOUR
        tau = max(step_s, daly_interval_s(max(ck.blocking_s, 1e-9), mttf_s))
        out.append(SizePoint(g, mttf_s / units.HOUR, tau, ettr_closed_form(inputs(fm, g, gpn, tau, ck, rec))))
    return out


def interval_choice(w: Workload, step_s: float, daly_s: float) -> tuple[float, str]:
    """Seconds between checkpoints, the chain's one decision: the workload's checkpoint interval (its one home),
    else the Daly optimum (never below one step)."""
    from slowlink.storage.checkpoint import interval_s

    ws = interval_s(w.checkpoint, step_s)
    if ws:
        return max(step_s, ws), "workload checkpoint interval"
    return max(step_s, daly_s), "Daly (2006) optimum"


@dataclass(frozen=True)
class Failures:
    """The failure model at the step, before any budget: the MTTF, the checkpoint and recovery costs, the interval
    used and its ETTR (what cost per token needs; :func:`goodput` adds the budget, Monte Carlo and sweeps)."""

    gpus: int
    gpus_per_node: int
    model: FailureModel
    step_s: float
    checkpoint: CheckpointTimes
    recovery: RecoveryCost
    mttf_h: float
    young_s: float
    daly_s: float               # the Daly interval, never below one step
    interval_s: float
    interval_source: str
    seed: int
    inputs: EttrInputs          # the ETTR inputs at the interval used
    ettr: float                 # their closed form


def failures(w: Workload, cluster: Cluster, storage: StoragePlan) -> Failures:
    """The failure model of ``w`` on ``cluster`` at the storage plan's running step (the step model's and the data
    stall), its checkpoint as the storage plan priced it; raises :class:`~slowlink.errors.SpecError` when the checkpoint
    cannot be priced (no storage and no overrides)."""
    gpus, gpn = w.parallel.world_size, cluster.gpus_per_node
    fm = failure_model(cluster.reliability, gpn)
    step_s = storage.run_step_s  # the step model's step and the data stall
    ck = checkpoint_times(w, cluster, storage.checkpoint)
    rec = RecoveryCost(fm.detect_s(gpus, gpn), fm.restart_s(gpus), ck.restore_s, ck.commit_lag_s)
    mttf_s = fm.mttf_h(gpus, gpn) * units.HOUR
    delta = max(ck.blocking_s, 1e-9)
    young, daly = young_interval_s(delta, mttf_s), daly_interval_s(delta, mttf_s)
    tau, why = interval_choice(w, step_s, daly)
    seed = cluster.reliability.seed if cluster.reliability else 0
    p = inputs(fm, gpus, gpn, tau, ck, rec)
    return Failures(gpus, gpn, fm, step_s, ck, rec, mttf_s / units.HOUR, young, max(step_s, daly), tau, why, seed, p,
                    ettr_closed_form(p))


def goodput(w: Workload, cluster: Cluster, step: StepResult, storage: StoragePlan, tokens: float | None = None,
            steps: int | None = None, at: Failures | None = None) -> Goodput:
    """The reliability model of ``w`` on ``cluster`` over a budget of ``tokens`` or ``steps`` (module docstring),
    from the failure model ``at`` the step (:func:`failures`, made here when not given)."""
    n_steps, n_tokens = budget_steps(w, tokens, steps)
    f = at if at is not None else failures(w, cluster, storage)
    fm, gpus, gpn, ck, rec = f.model, f.gpus, f.gpus_per_node, f.checkpoint, f.recovery
    p, best = f.inputs, inputs(fm, gpus, gpn, f.daly_s, ck, rec)
    parts = {"data_stall": storage.data_stall_s or 0.0, "bubble": step.bubble_s,
             "exposed_communication": step.exposed_comm_s}
    return Goodput(gpus, f.mttf_h, f.step_s, n_steps, n_tokens, f.interval_s, f.interval_source, f.young_s, f.daly_s,
                   best_interval_s(best, f.step_s), ettr_closed_form(p),
                   ettr_monte_carlo(p, np.random.default_rng(f.seed)), ettr_closed_form(best), rec, ck,
                   segment_times(p), fm.planned_rate_per_h(gpus, gpn), parts, fm.shares(gpus, gpn),
                   size_sweep(fm, gpn, ck, f.step_s), fm.restart.parts(gpus), fm.restart.override_s)
