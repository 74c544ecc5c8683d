"""Order statistics against a seeded Monte Carlo of the same step, and the jitter model's inputs."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from slowlink.errors import SpecError
from slowlink.straggler.jitter import (
    Interval,
    blom_max_normal,
    equal_intervals,
    expected_max_lognormal,
    expected_max_normal,
    expected_step_s,
    interval_cv,
    monte_carlo_step_s,
)


def test_expected_max_of_normals_matches_known_values() -> None:
    # E[max of 2] = 1/sqrt(pi); E[max of 3] = 3 / (2 sqrt(pi)) (David & Nagaraja, Order Statistics).
    assert expected_max_normal(2) == pytest.approx(1 / np.sqrt(np.pi), rel=1e-6)
    assert expected_max_normal(3) == pytest.approx(1.5 / np.sqrt(np.pi), rel=1e-6)
    assert expected_max_normal(1) == 0.0
    for n in (8, 512, 16384):  # Blom's approximation stays within 1% of the integral
        assert blom_max_normal(n) == pytest.approx(expected_max_normal(n), rel=0.01)


def test_lognormal_max_tends_to_normal_at_small_cv() -> None:
    assert expected_max_lognormal(64, 1.0, 1e-4) == pytest.approx(1 + 1e-4 * expected_max_normal(64), rel=1e-7)
    assert expected_max_lognormal(64, 1.0, 0.0) == 1.0
    sigma = np.sqrt(np.log1p(0.3**2))
    # n = 1: the mean itself
    assert expected_max_lognormal(1, 2.0, 0.3) == 2.0
    assert expected_max_lognormal(2, 1.0, 0.3) > stats.lognorm(sigma, scale=np.exp(-sigma**2 / 2)).mean()


@pytest.mark.parametrize("distribution", ["normal", "lognormal"])
@pytest.mark.parametrize("ranks", [8, 1024])
@pytest.mark.parametrize("cv", [0.01, 0.05])
def test_closed_form_within_2pct_of_monte_carlo(distribution: str, ranks: int, cv: float) -> None:
    ivs = equal_intervals(1.0, 0.25, 4)
    cf = expected_step_s(ivs, ranks, cv, 2 * cv, distribution)
    mc, se = monte_carlo_step_s(ivs, ranks, cv, 2 * cv, distribution, trials=32, rng=np.random.default_rng(7))
    assert cf == pytest.approx(mc, rel=0.02)
    assert abs(cf - mc) < 6 * se + 1e-3 * mc


def test_loss_grows_with_ranks_and_with_barriers_at_fixed_step_cv() -> None:
    ivs = equal_intervals(1.0, 0.0, 1)
    steps = [expected_step_s(ivs, n, 0.02) for n in (8, 64, 512, 4096)]
    assert steps == sorted(steps) and steps[0] > 1.0
    one = expected_step_s(equal_intervals(1.0, 0.0, 1), 512, interval_cv(0.02, 1))
    many = expected_step_s(equal_intervals(1.0, 0.0, 16), 512, interval_cv(0.02, 16))
    assert many - 1.0 == pytest.approx(4 * (one - 1.0), rel=1e-6)  # sqrt(16) x the loss


def test_no_jitter_no_loss() -> None:
    ivs = [Interval(0.5, 0.1), Interval(0.2)]
    assert expected_step_s(ivs, 4096, 0.0, 0.0) == pytest.approx(0.8)
    assert monte_carlo_step_s(ivs, 16, 0.0, 0.0)[0] == pytest.approx(0.8)


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"ranks": 0}, "ranks (0) must be >= 1"),
    ({"compute_cv": -0.1}, "compute_cv (-0.1) must be between 0 and 1"),
    ({"network_cv": 1.5}, "network_cv (1.5) must be between 0 and 1"),
    ({"distribution": "cauchy"}, "distribution ('cauchy') must be one of normal, lognormal"),
])
def test_bad_inputs(kwargs: dict[str, object], words: str) -> None:
    args: dict[str, object] = {"ranks": 8, "compute_cv": 0.02, "network_cv": 0.0, "distribution": "normal"} | kwargs
    with pytest.raises(SpecError, match=words.replace("(", r"\(").replace(")", r"\)")):
        expected_step_s([Interval(1.0)], **args)  # type: ignore[arg-type]
    with pytest.raises(SpecError, match=r"syncs \(0\) must be >= 1"):
        equal_intervals(1.0, 0.0, 0)
