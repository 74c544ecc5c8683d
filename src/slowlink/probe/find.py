"""Naming the slow part from probes: per-link bandwidth and latency between nodes, attributed to one link.

Probes run in rounds that cover every node's link once per direction, as all-pairs bandwidth checks do:
in round ``s`` node ``k`` streams to ``k + s`` (mod N) while every other node does the same, so each link
carries exactly one stream out and one in, and a stream's rate is the slower of its two ends. Two shifts
(1 and 2) give every node four streams with four different partners. Attribution (pure, no probing here):

* bandwidth: a link is a suspect when **every** stream through it ran below ``SLOW_FRACTION`` of the
  link's expected goodput (a neighbour of a slow link shares only one or two of its four streams with it);
  its slowdown is the median of its streams over that; streams to or from a node already named by its
  delay are left out (a TCP stream over a long round trip ramps up slower, and the relay that makes the
  delay here costs CPU);
* latency: the TCP connect round trip (SYN, RST) between two nodes crosses both their links twice; with
  the median round trip as the baseline, a node's one-way excess is half the smallest excess over its
  partners (one clean partner suffices); a node is a suspect above ``DELAY_FLOOR_S``.

The latency rule assumes a minority of slow nodes (the median round trip is a healthy one), which is the
case it is for: one bad part among many good ones.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from slowlink.bench.lateness import lateness
from slowlink.bench.record import CollectiveRow, CollectivesRecord, Record, TrainRow
from slowlink.errors import SpecError, field_error

SLOW_FRACTION = 0.8  # a stream below 80% of the median is slow: TCP streams on equal links differ by <10%
DELAY_FLOOR_S = 1e-3  # one-way excess that names a node: above the relay's 0-0.5 ms batching (docs/emulate.md)
SHIFTS = (1, 2)


@dataclass(frozen=True)
class Suspect:
    """A part named by the probes: ``kind`` (link or node), ``id`` (link or node name), the ``evidence`` in
    words and the ``slowdown`` (rate / expected for a link, one-way delay in seconds for a node)."""

    kind: str
    id: str
    evidence: str
    slowdown: float
    unit: str = "share"  # what slowdown is: share (of the expected rate), delay_s (one way) or slower (fraction)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "id": self.id, "evidence": self.evidence, "slowdown": self.slowdown,
                "unit": self.unit}

    def words(self) -> str:
        """The slowdown in words, by its unit."""
        if self.unit == "delay_s":
            return f"+{self.slowdown * 1e3:.1f} ms one way"
        if self.unit == "slower":
            return f"{self.slowdown:+.0%} slower"
        return f"{self.slowdown:.0%} of its rate"


def probe_pairs(nodes: int, shifts: tuple[int, ...] = SHIFTS) -> list[list[tuple[int, int]]]:
    """The rounds of (src, dst) pairs: one round per shift, every node sending once and receiving once."""
    return [[(k, (k + s) % nodes) for k in range(nodes)] for s in shifts if s % nodes > 0]


def rtt_pairs(nodes: int, shifts: tuple[int, ...] = SHIFTS) -> list[tuple[int, int]]:
    """Unordered node pairs of the rounds, each once (a round trip crosses both directions anyway)."""
    seen: dict[tuple[int, int], None] = {}
    for rnd in probe_pairs(nodes, shifts):
        for a, b in rnd:
            seen.setdefault((min(a, b), max(a, b)), None)
    return list(seen)


def slow_links(streams: list[tuple[int, int, float]], expected_bytes_s: float | None = None,
               link_name: str = "n{k}", exclude: frozenset[int] = frozenset()) -> list[Suspect]:
    """Links every one of whose streams (bytes/s) ran below ``SLOW_FRACTION`` of ``expected_bytes_s`` (the
    link's datasheet goodput; default: the median stream). Streams with an end in ``exclude`` (nodes named
    by their delay: a TCP stream over a long round trip ramps up slower) are left out; a link needs two."""
    kept = [(a, b, r) for a, b, r in streams if a not in exclude and b not in exclude]
    if not kept:
        return []
    ref = expected_bytes_s or statistics.median(r for _, _, r in kept)
    through: dict[int, list[float]] = {}
    for a, b, r in kept:
        through.setdefault(a, []).append(r)
        through.setdefault(b, []).append(r)
    out = []
    for k, rates in sorted(through.items()):
        if len(rates) >= 2 and max(rates) < SLOW_FRACTION * ref:
            share = statistics.median(rates) / ref
            out.append(Suspect("link", link_name.format(k=k),
                               f"all {len(rates)} streams through it at {min(rates) / ref:.0%}-"
                               f"{max(rates) / ref:.0%} of the expected {ref * 8e-6:.1f} Mbit/s", share))
    return out


def delayed_nodes(rtts: list[tuple[int, int, float]]) -> list[Suspect]:
    """Nodes whose every round trip exceeds the median by more than twice ``DELAY_FLOOR_S``."""
    if not rtts:
        return []
    base = statistics.median(t for _, _, t in rtts)
    excess: dict[int, list[float]] = {}
    for a, b, t in rtts:
        for k in (a, b):
            excess.setdefault(k, []).append(t - base)
    out = []
    for k, ex in sorted(excess.items()):
        one_way = min(ex) / 2
        if one_way > DELAY_FLOOR_S:
            out.append(Suspect("node", f"n{k}", f"all {len(ex)} round trips through it {min(ex) * 1e3:.1f}-"
                               f"{max(ex) * 1e3:.1f} ms above the median {base * 1e3:.2f} ms: "
                               f"+{one_way * 1e3:.1f} ms one way", one_way, "delay_s"))
    return out


RANK_TOLERANCE = 0.10  # the default regression tolerance of `slowlink compare` (bench/compare.py)


def _by_host(slow: dict[int, float], hosts: list[str] | None, n: int) -> tuple[list[tuple[str, list[int]]], list[int]]:
    """The hosts all of whose ranks are in ``slow`` (and not every rank), and the slow ranks left over."""
    names = hosts if hosts and len(hosts) == n else [""] * n
    left = set(slow)
    nodes = []
    for h in sorted({names[i] for i in slow} - {""}):
        mine = [i for i, x in enumerate(names) if x == h]
        if left.issuperset(mine) and len(mine) < n:
            nodes.append((h, mine))
            left -= set(mine)
    return nodes, sorted(left)


def _where(hosts: list[str] | None, i: int, n: int) -> str:
    return f" on {hosts[i]}" if hosts and len(hosts) == n and hosts[i] else ""


def slow_ranks(rank_compute_s: list[float], hostnames: list[str] | None = None,
               tolerance: float = RANK_TOLERANCE) -> list[Suspect]:
    """Ranks whose own compute time (``bench train``'s per-rank record) exceeds the median rank's by more
    than ``tolerance``: a slow GPU; a host all of whose ranks are slow (and not every host) is named as a
    node instead."""
    n = len(rank_compute_s)
    if n < 2:
        return []
    mid = statistics.median(rank_compute_s)
    slow = {i: t / mid - 1 for i, t in enumerate(rank_compute_s) if t > mid * (1 + tolerance)}
    nodes, ranks = _by_host(slow, hostnames, n)
    out = []
    for h, mine in nodes:
        lo, hi = min(slow[i] for i in mine), max(slow[i] for i in mine)
        out.append(Suspect("node", h, f"all {len(mine)} of its ranks compute {lo:+.0%} to {hi:+.0%} "
                           "against the median rank", hi, "slower"))
    for i in ranks:
        out.append(Suspect("rank", f"rank {i}", f"compute {rank_compute_s[i] * 1e3:.2f} ms{_where(hostnames, i, n)} "
                           f"against the median {mid * 1e3:.2f} ms", slow[i], "slower"))
    return out


def late_ranks(rows: Sequence[CollectiveRow], hostnames: list[str] | None = None,
               tolerance: float = RANK_TOLERANCE) -> list[Suspect]:
    """Ranks that keep the others waiting in a collectives sweep (rows with ``rank_time_s`` and ``rank_wait_s``).

    Every rank leaves a collective at about the same time, so its own time per iteration says nothing; the
    time it spends *inside* the call does: a rank that arrives ``d`` late waits ``d`` less than the others,
    who wait for it. Summed over the rows, rank i's lateness is ``L_i`` = the other ranks' median wait minus
    its own, against the median rank's iteration time ``T``; without the delay the loop would take
    ``T - L_i``, so it costs ``L_i / (T - L_i)`` and is named above ``tolerance``; a host all of whose ranks
    are late, as a node.
    """
    late = lateness(rows)
    if late is None:
        return []
    n = len(late.wait_s)
    slow = {i: x for i, x in enumerate(late.cost) if x > tolerance}
    nodes, ranks = _by_host(slow, hostnames, n)
    ms = 1e3 / late.rows  # summed s -> ms per iteration, mean of the rows

    def words(i: int) -> str:
        return (f"waits {late.wait_s[i] * ms:.2f} ms per call against the others' {late.ref_s[i] * ms:.2f} ms: "
                f"it arrives {(late.ref_s[i] - late.wait_s[i]) * ms:.2f} ms late")

    out = []
    for h, mine in nodes:
        worst = max(mine, key=lambda i: slow[i])
        out.append(Suspect("node", h, f"all {len(mine)} of its ranks arrive late; rank {worst} {words(worst)}",
                           slow[worst], "slower"))
    for i in ranks:
        out.append(Suspect("rank", f"rank {i}", f"{words(i)}{_where(hostnames, i, n)} (mean of {late.rows} rows)",
                           slow[i], "slower"))
    return out


def record_suspects(rec: Record, source: str = "result") -> list[Suspect]:
    """The slow ranks and nodes of a ``bench train`` record (its rows' ``rank_compute_s``) or of a ``bench
    collectives`` record (its rows' ``rank_wait_s``, :func:`late_ranks`), with its hosts by rank."""
    hosts = rec.hosts or None
    if isinstance(rec, CollectivesRecord):
        rows = [r for r in rec.rows if r.measured_ranks]
        if not rows:
            raise SpecError(field_error(f"{source}: rows.rank_wait_s", None, "is missing: find-slow reads the "
                                        "per-rank waits of a `bench collectives` result written by this version "
                                        "over gloo (nccl calls return before the collective ends)"))
        return late_ranks(rows, hosts)
    # The schema (TrainRow.rank_compute_s) has already refused times that are not positive numbers.
    times = [t for r in rec.rows if isinstance(r, TrainRow) and (t := r.rank_compute_s)]
    if not times:
        raise SpecError(field_error(f"{source}: rows.rank_compute_s", None, "is missing: find-slow reads the "
                                    "per-rank times of a `bench train` result written by this version"))
    return slow_ranks(times[-1], hosts)
