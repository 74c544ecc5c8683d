"""Everyday jitter: what waiting for the slowest of N ranks at every synchronisation costs a step.

Model. A step is a sequence of ``S`` intervals between synchronisation points (each collective on the
critical path, each pipeline hand-off, the gradient reduction). In interval ``k`` rank ``i`` computes for
``c_k (1 + cv_c X_ik)`` and communicates for ``n_k (1 + cv_n Y_ik)``, with ``X, Y`` independent across ranks
and intervals, mean 0 and variance 1 (normal, or lognormal with that mean and CV). The interval ends when
the slowest of the ``N`` ranks taking part does. The groups of consecutive synchronisations overlap (TP
inside a node, pipeline neighbours, data parallelism across), so a late rank delays every rank within a
few intervals: each synchronisation is taken as a barrier over all ``N`` ranks (exact for pure data
parallelism, an upper bound otherwise). Then

    E[step] = sum_k E[max_i T_ik],   T_ik = c_k (1 + cv_c X_ik) + n_k (1 + cv_n Y_ik)

and the expected maximum of ``N`` independent draws comes from order statistics:

    E[max of N] = integral x N f(x) F(x)^(N-1) dx                 (e.g. David & Nagaraja, Order Statistics,
                                                                   3rd ed. 2003, eq. 2.1.6 with r = n)

integrated numerically (scipy ``quad``; exact to its tolerance). A normal ``T`` is normal (mean
``m = c + n``, sd ``s = sqrt((cv_c c)^2 + (cv_n n)^2)``), so ``E[max] = m + s e_N`` with ``e_N`` the expected
maximum of ``N`` standard normals; Blom's approximation ``e_N ~ Phi^-1((N - 0.375) / (N + 0.25))`` (Blom,
Statistical Estimates and Transformed Beta-Variables, 1958) is given alongside. A sum of lognormals is
matched by one lognormal of the same mean and variance (Fenton 1960, "Fenton-Wilkinson"). The seeded
Monte Carlo (:func:`monte_carlo_step_s`) draws the same step rank by rank, without either shortcut.

Synchronisation points matter through the CV they are given for: with ``cv`` per interval the loss is
``cv e_N`` of the step whatever ``S``; with a rank's whole-step CV fixed (what a per-rank step time
measures), each of ``S`` independent intervals has ``cv_step sqrt(S)`` (:func:`interval_cv`) and the loss
grows as ``sqrt(S)``: more barriers leave less room for one rank's slow and fast moments to cancel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from slowlink.errors import SpecError, field_error

DISTRIBUTIONS = ("normal", "lognormal")


@dataclass(frozen=True)
class Interval:
    """One interval between synchronisations: mean compute and mean communication of a rank, seconds."""

    compute_s: float
    network_s: float = 0.0


def check_jitter(ranks: int, compute_cv: float, network_cv: float, distribution: str) -> None:
    """Reject inputs the model does not cover, naming field, value and rule."""
    if ranks < 1:
        raise SpecError(field_error("ranks", ranks, "must be >= 1"))
    for name, cv in (("compute_cv", compute_cv), ("network_cv", network_cv)):
        if not 0 <= cv <= 1:
            raise SpecError(field_error(name, cv, "must be between 0 and 1"))
    if distribution not in DISTRIBUTIONS:
        raise SpecError(field_error("distribution", distribution, f"must be one of {', '.join(DISTRIBUTIONS)}"))


def interval_cv(step_cv: float, intervals: int) -> float:
    """The CV of each of ``intervals`` independent equal intervals whose sum has CV ``step_cv``."""
    return step_cv * math.sqrt(intervals)


def blom_max_normal(n: int) -> float:
    """Blom's approximation of the expected maximum of ``n`` standard normals."""
    from scipy import stats  # ~1-2 s to import: loaded where an order statistic is computed, not to check inputs

    return float(stats.norm.ppf((n - 0.375) / (n + 0.25))) if n > 1 else 0.0


@lru_cache(maxsize=1024)
def expected_max_normal(n: int) -> float:
    """E[max of ``n`` independent standard normals], by integrating x n phi(x) Phi(x)^(n-1)."""
    if n <= 1:
        return 0.0
    from scipy import integrate, stats

    def density(x: float) -> float:
        return x * n * math.exp(stats.norm.logpdf(x) + (n - 1) * stats.norm.logcdf(x))
    peak = blom_max_normal(n)
    value, _ = integrate.quad(density, -12.0, 12.0, points=[peak - 1.0, peak, peak + 1.0], limit=200)
    return float(value)


@lru_cache(maxsize=1024)
def expected_max_lognormal(n: int, mean: float, cv: float) -> float:
    """E[max of ``n``] lognormals of ``mean`` and coefficient of variation ``cv``, by the same integral."""
    if cv == 0 or n <= 1:
        return mean
    sigma = math.sqrt(math.log1p(cv * cv))
    mu = math.log(mean) - sigma * sigma / 2
    # In z = (ln x - mu) / sigma the lognormal maximum is exp(mu + sigma z) over the normal order statistic.
    from scipy import integrate, stats

    def density(z: float) -> float:
        return math.exp(mu + sigma * z) * n * math.exp(stats.norm.logpdf(z) + (n - 1) * stats.norm.logcdf(z))
    peak = blom_max_normal(n)
    value, _ = integrate.quad(density, -12.0, 14.0, points=[peak - 1.0, peak, peak + 1.0], limit=200)
    return float(value)


def expected_interval_max_s(iv: Interval, ranks: int, compute_cv: float, network_cv: float,
                            distribution: str = "normal") -> float:
    """E[max over ``ranks`` of one interval's time] (normal: exact; lognormal: Fenton-Wilkinson sum)."""
    mean = iv.compute_s + iv.network_s
    sd = math.hypot(compute_cv * iv.compute_s, network_cv * iv.network_s)
    if mean <= 0:
        return 0.0
    if distribution == "normal":
        return mean + sd * expected_max_normal(ranks)
    return expected_max_lognormal(ranks, mean, sd / mean)


def expected_step_s(intervals: list[Interval], ranks: int, compute_cv: float, network_cv: float = 0.0,
                    distribution: str = "normal") -> float:
    """Closed-form expected step time: the sum of each interval's expected maximum over ``ranks``."""
    check_jitter(ranks, compute_cv, network_cv, distribution)
    return sum(expected_interval_max_s(iv, ranks, compute_cv, network_cv, distribution) for iv in intervals)


def _draw(rng: np.random.Generator, mean: float, cv: float, shape: tuple[int, ...], distribution: str) -> np.ndarray:
    if cv == 0 or mean == 0:
        return np.full(shape, mean)
    if distribution == "normal":
        out: np.ndarray = rng.normal(mean, cv * mean, shape)
        return out
    sigma = math.sqrt(math.log1p(cv * cv))
    out = rng.lognormal(math.log(mean) - sigma * sigma / 2, sigma, shape)
    return out


def monte_carlo_step_s(intervals: list[Interval], ranks: int, compute_cv: float, network_cv: float = 0.0,
                       distribution: str = "normal", *, trials: int = 200, rng: np.random.Generator | None = None,
                       max_draws: int = 2**22) -> tuple[float, float]:
    """Seeded Monte Carlo of the same step: (mean step time, standard error of that mean), seconds.

    Every trial draws each rank's compute and network time of every interval, takes the maximum over ranks
    per interval and sums. Draws are made in batches of at most ``max_draws`` values (memory bound).
    """
    check_jitter(ranks, compute_cv, network_cv, distribution)
    if trials < 2:
        raise SpecError(field_error("trials", trials, "must be >= 2"))
    gen = rng if rng is not None else np.random.default_rng(0)
    steps = np.zeros(trials)
    batch = max(1, max_draws // max(1, ranks))
    for iv in intervals:
        for lo in range(0, trials, batch):
            k = min(batch, trials - lo)
            t = _draw(gen, iv.compute_s, compute_cv, (k, ranks), distribution)
            t = t + _draw(gen, iv.network_s, network_cv, (k, ranks), distribution)
            steps[lo:lo + k] += t.max(axis=1)
    return float(steps.mean()), float(steps.std(ddof=1) / math.sqrt(trials))


def equal_intervals(compute_s: float, network_s: float, syncs: int) -> list[Interval]:
    """A step's mean compute and exposed communication split over ``syncs`` equal intervals."""
    if syncs < 1:
        raise SpecError(field_error("syncs", syncs, "must be >= 1"))
    return [Interval(compute_s / syncs, network_s / syncs)] * syncs
