"""Which rank of a ``bench collectives`` sweep keeps the others waiting: every rank leaves a collective at
about the same time, so its own time per call says nothing, but the time it spends *inside* the calls does
(a rank that arrives ``d`` late waits ``d`` less than the others, who wait for it). Read by ``compare
--nodes`` and by ``find-slow --record``."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from slowlink.bench.record import CollectiveRow


@dataclass(frozen=True)
class Lateness:
    """Per rank of a collectives sweep, summed over its rows: ``wait_s`` inside the calls, ``ref_s`` the median
    wait of the *other* ranks, and ``cost`` = ``L / (T - L)`` with ``L = ref_s - wait_s`` and ``T`` the median
    rank's iteration time; ``rows`` summed."""

    wait_s: list[float]
    ref_s: list[float]
    cost: list[float]
    rows: int


def lateness(rows: Sequence[CollectiveRow]) -> Lateness | None:
    """:class:`Lateness` of the rows (each with ``rank_time_s`` and ``rank_wait_s``) with the first row's rank
    count (None below two ranks).

    The reference is the others' median, not everyone's: with two ranks everyone's median is the midpoint and
    would halve the late rank's lateness; with more, one late rank barely moves it either way.
    """
    n = rows[0].ranks if rows else 0
    timed = [(t, w) for r in rows if r.ranks == n and (t := r.rank_time_s) and (w := r.rank_wait_s)]
    if n < 2:
        return None
    wait = [sum(w[i] for _, w in timed) for i in range(n)]
    total = statistics.median(sum(t[i] for t, _ in timed) for i in range(n))
    ref = [statistics.median(w for j, w in enumerate(wait) if j != i) for i in range(n)]
    cost = [(r - w) / max(total - (r - w), 1e-12) for w, r in zip(wait, ref, strict=True)]
    return Lateness(wait, ref, cost, len(timed))
