"""ETTR: the exact closed form against its seeded Monte Carlo over a grid of job sizes and intervals (within 2
points, the issue's done-when), the optimum intervals of Young (1974) and Daly (2006), and the first-order form."""

from __future__ import annotations

import math

import numpy as np
import pytest

from slowlink.errors import InfeasiblePlan
from slowlink.reliability.ettr import (
    EttrInputs,
    best_interval_s,
    daly_interval_s,
    ettr_closed_form,
    ettr_first_order,
    ettr_monte_carlo,
    segment_times,
    young_interval_s,
)
from slowlink.reliability.failures import default_model

GRID_GPUS = (512, 2048, 16384, 65536, 131072)
GRID_INTERVALS_S = (60.0, 300.0, 1800.0, 3600.0, 7200.0)


def _inputs(gpus: int, tau_s: float, checkpoint_s: float = 30.0, recovery_s: float = 400.0) -> EttrInputs:
    fm = default_model()
    return EttrInputs(tau_s, checkpoint_s, fm.job_rate_per_h(gpus, 8) / 3600, recovery_s,
                      fm.planned_rate_per_h(gpus, 8) / 3600, 330.0)


def test_closed_form_and_monte_carlo_agree_within_two_points_over_the_grid() -> None:
    rng = np.random.default_rng(7)
    worst = 0.0
    for g in GRID_GPUS:
        for tau in GRID_INTERVALS_S:
            p = _inputs(g, tau)
            worst = max(worst, abs(ettr_closed_form(p) - ettr_monte_carlo(p, rng, segments=5000)))
    assert worst < 0.02


def test_monte_carlo_is_reproducible_with_a_seed() -> None:
    p = _inputs(16384, 600)
    a = ettr_monte_carlo(p, np.random.default_rng(3))
    assert a == ettr_monte_carlo(p, np.random.default_rng(3))
    assert a != ettr_monte_carlo(p, np.random.default_rng(4))


def test_segment_times_sum_to_the_wall_and_no_failures_leave_only_checkpoints() -> None:
    seg = segment_times(_inputs(16384, 600))
    assert seg.wall_s == pytest.approx(600 / seg.ettr)
    quiet = EttrInputs(600.0, 30.0, 0.0, 400.0)
    assert ettr_closed_form(quiet) == pytest.approx(600 / 630)


def test_first_order_form_matches_when_failures_are_rare() -> None:
    p = _inputs(512, 600)
    assert ettr_first_order(p) == pytest.approx(ettr_closed_form(p), abs=1e-3)
    big = _inputs(131072, 7200)
    assert ettr_first_order(big) < ettr_closed_form(big) - 0.05  # the expansion breaks when lambda s ~ 1


def test_young_and_daly_intervals() -> None:
    # Young (1974): sqrt(2 delta M); Daly (2006) eq. 37 adds higher-order terms and subtracts delta.
    assert young_interval_s(30, 3600) == pytest.approx(math.sqrt(2 * 30 * 3600))
    x = 30 / 7200
    assert daly_interval_s(30, 3600) == pytest.approx(math.sqrt(2 * 30 * 3600) * (1 + math.sqrt(x) / 3 + x / 9) - 30)
    assert daly_interval_s(8000, 3600) == 3600  # a checkpoint longer than 2 M: checkpoint every M


def test_daly_interval_is_the_exact_optimum_of_the_closed_form() -> None:
    for g in GRID_GPUS:
        p = _inputs(g, 600)
        mttf = 1 / p.rate_per_s
        daly = daly_interval_s(p.checkpoint_s, mttf)
        exact = best_interval_s(p, 1.0)
        assert daly == pytest.approx(exact, rel=0.02)
        for off in (0.5, 2.0):  # ETTR falls on either side of the optimum
            worse = EttrInputs(daly * off, p.checkpoint_s, p.rate_per_s, p.recovery_s, p.planned_rate_per_s,
                               p.planned_cost_s)
            assert ettr_closed_form(worse) < ettr_closed_form(EttrInputs(daly, *_tail(p)))


def _tail(p: EttrInputs) -> tuple[float, float, float, float, float]:
    return p.checkpoint_s, p.rate_per_s, p.recovery_s, p.planned_rate_per_s, p.planned_cost_s


def test_a_segment_that_never_completes_is_refused() -> None:
    p = _inputs(131072, 10 * 24 * 3600.0)
    with pytest.raises(InfeasiblePlan, match="MTTF"):
        ettr_closed_form(p)


def test_daly_interval_reproduces_his_published_optima() -> None:
    # Daly 2006 (FGCS 22(3)), Figs. 3-5: delta = 5 min and M = 24 h, 6 h, 15 min -> tau_opt 117, 57, 9.1 min
    # (rounded as printed).
    assert daly_interval_s(300, 86400) / 60 == pytest.approx(117, abs=0.5)
    assert daly_interval_s(300, 21600) / 60 == pytest.approx(57, abs=0.5)
    assert daly_interval_s(300, 900) / 60 == pytest.approx(9.1, abs=0.05)
