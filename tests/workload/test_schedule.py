"""The pipeline schedule run op by op (workload/schedule.py) against Megatron-Core's order and the closed forms."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from slowlink.workload.schedule import _peak_in_flight, makespan_s, peak_in_flight, pipeline_s, rank_schedule


def _uniform(tf: float = 1.0, tb: float = 2.0) -> Callable[[str, int, int], float]:
    return lambda kind, rank, chunk: tf if kind == "F" else tb


@pytest.mark.parametrize(("pp", "vp", "m"), [(2, 1, 4), (4, 1, 9), (8, 1, 8), (2, 2, 4), (4, 3, 8), (8, 6, 16),
                                             (16, 8, 16)])
def test_equal_chunks_and_instant_hops_give_the_closed_form(pp: int, vp: int, m: int) -> None:
    # Narayanan et al. 2021 Sec. 2.2: m x vp chunk-pairs of (tf + tb), plus a bubble of (pp - 1) / vp stage
    # micro-batches = (pp - 1) chunk-pairs (interleaved: m a multiple of pp)
    assert makespan_s(pp, vp, m, _uniform(), 0.0) == pytest.approx(m * vp * 3.0 + (pp - 1) * 3.0)


def test_a_short_last_group_costs_more_than_the_closed_form() -> None:
    # m not a multiple of pp: Megatron-Core runs the remainder as a last, smaller group (schedules.py l.657)
    assert makespan_s(4, 2, 6, _uniform(), 0.0) > 6 * 2 * 3.0 + 3 * 3.0


def test_the_interleaved_order_is_megatrons_table() -> None:
    # core_r0.10.0 schedules.py, the lookup table built in groups of pp micro-batches, chunk by chunk: for pp 2,
    # vp 2 and 5 micro-batches the forwards run mb 0 1 0 1 2 3 2 3 4 4 on chunks 0 0 1 1 0 0 1 1 0 1, backwards
    # the same with the chunk reversed; the last rank warms up with (vp - 1) x pp forwards, the first with 2 more
    last = rank_schedule(2, 2, 5, 1)
    fwd = [(c, mb) for kind, c, mb in last if kind == "F"]
    bwd = [(c, mb) for kind, c, mb in last if kind == "B"]
    assert fwd == [(0, 0), (0, 1), (1, 0), (1, 1), (0, 2), (0, 3), (1, 2), (1, 3), (0, 4), (1, 4)]
    assert bwd == [(1, 0), (1, 1), (0, 0), (0, 1), (1, 2), (1, 3), (0, 2), (0, 3), (1, 4), (0, 4)]
    assert [k for k, _, _ in last[:4]] == ["F", "F", "F", "B"]  # 2 warm-up forwards, then 1F1B
    assert [k for k, _, _ in rank_schedule(2, 2, 5, 0)[:6]] == ["F"] * 5 + ["B"]  # 4 warm-up, then F then B
    # 1F1B (vp 1): rank r warms up with pp - r - 1 forwards
    assert [k for k, _, _ in rank_schedule(4, 1, 6, 1)[:4]] == ["F", "F", "F", "B"]


def test_the_first_micro_batch_crosses_every_virtual_stage_both_ways() -> None:
    # with hops far longer than any op, the step waits for at least the first forward's pp x vp - 1 crossings
    # and the last backward's as many (the lock-step order adds more), not the closed form's 2 (pp - 1)
    for pp, vp, hops in ((4, 1, 10), (4, 3, 24), (8, 2, 36)):
        t = makespan_s(pp, vp, pp, _uniform(1e-6, 2e-6), 1.0)
        assert t >= 2 * (pp * vp - 1)
        assert t == pytest.approx(hops, rel=1e-3)  # the longest chain of crossings, counted by the schedule


def test_a_heavy_chunk_stalls_the_steady_state_and_the_extrapolation_is_exact() -> None:
    # end ranks with lighter chunks (fewer layers) and the last one's last chunk carrying the logits (Llama 3's
    # layout): the schedule runs slower per micro-batch than any rank's own total, and pipeline_s's periodic
    # extension equals running every micro-batch
    pp, vp = 4, 3

    def op_s(kind: str, rank: int, chunk: int) -> float:
        base = 1.0 if kind == "F" else 2.0
        light = 0.75 * base if rank in (0, pp - 1) else base
        return light + (base if (rank, chunk) == (pp - 1, vp - 1) else 0.0)

    rate = (makespan_s(pp, vp, 8 * pp, op_s, 0.1) - makespan_s(pp, vp, 7 * pp, op_s, 0.1)) / pp
    slowest_rank = max(sum(op_s(k, r, c) for k in "FB" for c in range(vp)) for r in range(pp))
    assert rate > 1.05 * slowest_rank
    for m in (13 * pp, 13 * pp + 3):
        assert pipeline_s(pp, vp, m, op_s, 0.1) == pytest.approx(makespan_s(pp, vp, m, op_s, 0.1), rel=1e-12)


def test_every_layout_megatron_accepts_runs_and_extends_exactly() -> None:
    # interleaved: m a multiple of pp (check_plan refuses others, as Megatron-Core does), the extension exact; 1F1B:
    # any m, the extension within the ripple of a period that need not divide 2 pp (pp - 1 here)
    def op_s(kind: str, rank: int, chunk: int) -> float:
        return (1.0 if kind == "F" else 2.0) * (1.3 if chunk == 0 else 1.0) * (0.8 if rank == 0 else 1.0)

    worst = 0.0
    for pp in range(2, 7):
        for vp in range(1, 5):
            for m in range(1, 10 * pp):
                if vp > 1 and m % pp:
                    continue
                whole = makespan_s(pp, vp, m, op_s, 0.05)
                error = abs(pipeline_s(pp, vp, m, op_s, 0.05) / whole - 1.0)
                assert error < (1e-12 if vp > 1 else 2e-3), (pp, vp, m)
                worst = max(worst, error)
    assert worst > 1e-6  # the 1F1B ripple is there: the bound above is what the extension can miss


@pytest.mark.parametrize(("pp", "vp"), [(4, 1), (8, 1), (4, 3), (8, 6), (16, 8)])
def test_peak_in_flight_is_megatrons_warmup_plus_one(pp: int, vp: int) -> None:
    # rank r: (pp - r - 1) x 2 + (vp - 1) x pp warm-up forwards interleaved (pp - r - 1 in 1F1B), then one more
    # forward before its first backward; many micro-batches (40 pp, the whole order walked) change nothing
    for r in range(pp):
        warm = pp - r - 1 if vp == 1 else (pp - r - 1) * 2 + (vp - 1) * pp
        assert peak_in_flight(pp, vp, 40 * pp, r) == warm + 1 == _peak_in_flight(pp, vp, 40 * pp, r)


def test_peak_in_flight_with_fewer_micro_batches_than_stages() -> None:
    assert [peak_in_flight(8, 1, 3, r) for r in range(8)] == [3, 3, 3, 3, 3, 3, 2, 1]
    # interleaved with as many micro-batches as stages: every forward runs before the first backward (Megatron-Core
    # sets all_warmup_microbatches when num_microbatches == pp): m x vp chunks held on the first ranks
    assert [peak_in_flight(16, 2, 16, r) for r in (0, 1, 15)] == [32, 32, 17]
