"""Effective training time ratio (ETTR) of a checkpointed job under random failures, in closed form and by
seeded Monte Carlo, and the checkpoint interval that maximises it.

The job runs in segments of ``tau`` seconds of training followed by a checkpoint that stops training for
``delta`` seconds (``s = tau + delta``). Unexpected failures arrive as a Poisson process of rate
``lambda = 1 / MTTF`` while the job runs; each one loses the work since the segment began and costs a
recovery ``R`` (detection + restart + restore + the async commit lag), then the segment starts over.
Planned interruptions arrive at rate ``lambda_p`` while running and cost ``R_p`` each, losing nothing (the
job checkpoints before it stops). For exponential failures the expected wall-clock time of one segment is
exact (the renewal argument of Daly 2006, Sec. 3, with failures not striking during recovery)::

    failures per segment     E[F] = e^(lambda s) - 1
    running time per segment E[T_run] = E[F] / lambda               (the lost work is E[T_run] - s)
    wall per segment         E[W] = E[T_run] (1 + lambda_p R_p) + E[F] R
    ETTR = tau / E[W]

Optimum interval: Young (1974), "A first order approximation to the optimum checkpoint interval", CACM 17(9):
``tau = sqrt(2 delta M)``; Daly (2006), "A higher order estimate of the optimum checkpoint interval for
restart dumps", FGCS 22(3), eq. 37: ``tau = sqrt(2 delta M) [1 + sqrt(delta / 2M) / 3 + (delta / 2M) / 9]
- delta`` for ``delta < 2M``, else ``tau = M``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from slowlink.errors import InfeasiblePlan

MAX_FAILURES_PER_SEGMENT = 1e4  # beyond e^(lambda s) ~ 1e4 a segment essentially never completes


@dataclass(frozen=True)
class EttrInputs:
    """One job's failure process and costs, seconds and failures per second."""

    tau_s: float  # training between checkpoints
    checkpoint_s: float  # training stopped per checkpoint (delta)
    rate_per_s: float  # unexpected failures (lambda = 1 / MTTF)
    recovery_s: float  # per unexpected failure: detect + restart + restore + commit lag (R)
    planned_rate_per_s: float = 0.0  # planned interruptions (lambda_p)
    planned_cost_s: float = 0.0  # per planned interruption: restart + restore (R_p)

    @property
    def segment_s(self) -> float:
        return self.tau_s + self.checkpoint_s

    def check(self) -> None:
        """Refuse a segment so long that it (almost) never completes between failures."""
        if self.rate_per_s * self.segment_s > math.log(MAX_FAILURES_PER_SEGMENT):
            raise InfeasiblePlan(
                f"checkpoint interval ({self.tau_s:.4g} s) + checkpoint ({self.checkpoint_s:.4g} s) is "
                f"{self.rate_per_s * self.segment_s:.1f} x the MTTF ({1 / self.rate_per_s:.4g} s): a segment "
                "almost never completes; checkpoint more often or faster", rule="segment_completes")


@dataclass(frozen=True)
class SegmentTimes:
    """Expected seconds of one segment, by what they were spent on (they sum to the wall time)."""

    useful_s: float
    checkpoint_s: float
    lost_work_s: float
    recovery_s: float
    planned_s: float
    failures: float
    planned: float = 0.0  # planned interruptions per segment

    @property
    def wall_s(self) -> float:
        return self.useful_s + self.checkpoint_s + self.lost_work_s + self.recovery_s + self.planned_s

    @property
    def ettr(self) -> float:
        return self.useful_s / self.wall_s


def segment_times(p: EttrInputs) -> SegmentTimes:
    """Expected time of one segment split by cause (module docstring, the exact closed form)."""
    p.check()
    s = p.segment_s
    failures = math.expm1(p.rate_per_s * s)
    running = failures / p.rate_per_s if p.rate_per_s > 0 else s
    planned = running * p.planned_rate_per_s
    return SegmentTimes(p.tau_s, p.checkpoint_s, running - s, failures * p.recovery_s, planned * p.planned_cost_s,
                        failures, planned)


def ettr_closed_form(p: EttrInputs) -> float:
    """ETTR = tau / E[wall per segment] (module docstring)."""
    return segment_times(p).ettr


def ettr_first_order(p: EttrInputs) -> float:
    """The first-order estimate (Young 1974's expansion): ``1 - delta / s - lambda (s / 2 + R) - lambda_p R_p``,
    accurate while ``lambda s << 1``; shown beside the exact form, never used for the answer."""
    s = p.segment_s
    return 1.0 - p.checkpoint_s / s - p.rate_per_s * (s / 2 + p.recovery_s) - p.planned_rate_per_s * p.planned_cost_s


def ettr_monte_carlo(p: EttrInputs, rng: np.random.Generator, segments: int = 20000) -> float:
    """ETTR by simulating ``segments`` segments with the same failure process as the closed form: the failed
    attempts of each segment are geometric (success probability ``e^(-lambda s)``), each failure's lost work a
    draw of the exponential truncated to ``[0, s)`` (inverse CDF), planned interruptions Poisson over the
    running time."""
    p.check()
    s, lam = p.segment_s, p.rate_per_s
    if lam > 0:
        fails = rng.geometric(math.exp(-lam * s), size=segments) - 1
        n_fail = int(fails.sum())
        u = rng.random(n_fail)
        lost = float((-np.log1p(u * math.expm1(-lam * s)) / lam).sum())
    else:
        n_fail, lost = 0, 0.0
    running = segments * s + lost
    planned = int(rng.poisson(p.planned_rate_per_s * running)) if p.planned_rate_per_s > 0 else 0
    wall = running + n_fail * p.recovery_s + planned * p.planned_cost_s
    return segments * p.tau_s / wall


def young_interval_s(checkpoint_s: float, mttf_s: float) -> float:
    """Young (1974): ``tau = sqrt(2 delta M)``."""
    return math.sqrt(2.0 * checkpoint_s * mttf_s)


def daly_interval_s(checkpoint_s: float, mttf_s: float) -> float:
    """Daly (2006), eq. 37: Young's interval with higher-order terms, minus the checkpoint; ``M`` once the
    checkpoint takes longer than ``2 M``."""
    if checkpoint_s >= 2.0 * mttf_s:
        return mttf_s
    x = checkpoint_s / (2.0 * mttf_s)
    return math.sqrt(2.0 * checkpoint_s * mttf_s) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - checkpoint_s


def best_interval_s(p: EttrInputs, lo_s: float) -> float:
    """The interval that maximises the exact closed form (bounded scalar search, scipy's Brent), at least
    ``lo_s`` (one training step): checkpoints cannot be closer than a step."""
    from scipy.optimize import minimize_scalar

    mttf = 1.0 / p.rate_per_s
    hi = max(lo_s * 2, math.log(MAX_FAILURES_PER_SEGMENT) * mttf - p.checkpoint_s) * 0.99
    res = minimize_scalar(lambda t: -ettr_closed_form(EttrInputs(t, *_rest(p))), bounds=(lo_s, hi),
                          method="bounded", options={"xatol": 1e-3 * lo_s})
    return float(res.x)


def _rest(p: EttrInputs) -> tuple[float, float, float, float, float]:
    return p.checkpoint_s, p.rate_per_s, p.recovery_s, p.planned_rate_per_s, p.planned_cost_s
