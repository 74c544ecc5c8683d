"""The validation cases of the reliability model (reliability/validate.py): the best-interval cases against
Daly (2006)'s published optima, the second-hand Kokolis et al. pair shown but not scored, and the error summary
kind by kind."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from slowlink.reliability.validate import cases, interval_case, mttf_case, published, summary


def _interval(case_id: str) -> dict[str, object]:
    return next(c for c in published()["interval"] if c["id"] == case_id)


def test_the_best_interval_reproduces_dalys_published_optima() -> None:
    # Daly 2006, Figs. 3-5 (FGCS 22(3)): M = 24 h, 6 h, 15 min with delta = 5 min, R = 10 min -> 117, 57, 9.1 min.
    for c in published()["interval"]:
        assert abs(interval_case(c).error) < 0.01, c["id"]
    # Young's first-order sqrt(2 delta M) is 35% too long at M = 15 min: the case must use the exact optimum.
    short = interval_case(_interval("daly-2006-m15min"))
    assert math.sqrt(2 * 5 * 15) > 1.3 * short.predicted


def test_the_best_interval_follows_the_checkpoint_not_the_recovery() -> None:
    base = _interval("daly-2006-m24h")
    t = interval_case(base).predicted
    twice = interval_case({**base, "checkpoint_s": 600}).predicted
    assert twice / t == pytest.approx(math.sqrt(2), rel=0.02)  # ~ sqrt(2 delta M) while delta << M
    # R multiplies the expected wall time of every failed segment, so it cannot move the optimum (Daly 2006).
    assert interval_case({**base, "recovery_s": 0}).predicted == pytest.approx(t, rel=1e-3)
    assert interval_case({**base, "mttf_s": 4 * 86400}).predicted / t == pytest.approx(2, rel=0.02)


def test_the_kokolis_pair_is_shown_second_hand_and_not_scored() -> None:
    c = next(c for c in published()["mttf"] if c["id"] == "kokolis-rsc1-1024")
    case = mttf_case(c)
    assert case.second_hand and not case.scored
    assert case.predicted == pytest.approx(47.7 * 24 / 128)  # the 8-GPU jobs' MTTF over the 1,024-GPU job's nodes


def test_summary_is_over_scored_cases_kind_by_kind() -> None:
    cs = cases()
    s = summary(cs)
    scored = [c for c in cs if c.scored]
    assert s is not None and set(s.by_kind) == {"mttf", "lost_work", "ettr", "interval"}
    assert sum(k.scored_cases for k in s.by_kind.values()) == s.scored_cases == len(scored)
    assert s.mean_abs_error == pytest.approx(sum(abs(c.error) for c in scored) / len(scored))
    assert s.max_abs_error == max(k.max_abs_error for k in s.by_kind.values())
    assert set(s.to_json()) == {"mean_abs_error", "max_abs_error", "scored_cases", "by_kind"}  # the --json keys
    # An unscored case never moves the summary, however wrong it is.
    worse = [replace(c, predicted=100 * c.published) if not c.scored else c for c in cs]
    assert summary(worse) == s
    assert summary([c for c in cs if not c.scored]) is None
