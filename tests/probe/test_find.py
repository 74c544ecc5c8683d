"""Attribution of probe results to one link or node (pure: no namespaces needed)."""

from __future__ import annotations

import pytest

from slowlink.bench.record import CollectiveRow
from slowlink.probe.find import delayed_nodes, probe_pairs, rtt_pairs, slow_links

MBIT = 1e6 / 8


def _streams(slow: dict[int, float], n: int = 6, rate: float = 95 * MBIT) -> list[tuple[int, int, float]]:
    """Every probe stream at ``rate``, times the slower end's fraction."""
    return [(a, b, rate * min(slow.get(a, 1.0), slow.get(b, 1.0))) for rnd in probe_pairs(n) for a, b in rnd]


def test_rounds_cover_every_link_once_per_direction() -> None:
    for rnd in probe_pairs(6):
        assert sorted(a for a, _ in rnd) == list(range(6)) and sorted(b for _, b in rnd) == list(range(6))
    assert len(rtt_pairs(6)) == 12 and len(set(rtt_pairs(6))) == 12
    assert probe_pairs(2, (1, 2)) == [[(0, 1), (1, 0)]]  # a shift of the whole ring is no round


def test_half_rate_link_is_named_and_its_neighbours_are_not() -> None:
    found = slow_links(_streams({1: 0.5}), 95 * MBIT)
    assert [(s.kind, s.id) for s in found] == [("link", "n1")]
    assert found[0].slowdown == pytest.approx(0.5)
    assert "all 4 streams" in found[0].evidence
    assert slow_links(_streams({}), 95 * MBIT) == []
    assert [s.id for s in slow_links(_streams({1: 0.5}))] == ["n1"]  # the median as the reference


def test_streams_of_a_delayed_node_are_left_out() -> None:
    streams = _streams({1: 0.5, 4: 0.6})
    assert [s.id for s in slow_links(streams, 95 * MBIT)] == ["n1", "n4"]
    assert [s.id for s in slow_links(streams, 95 * MBIT, exclude=frozenset({4}))] == ["n1"]


def test_delayed_node_is_named_with_its_one_way_delay() -> None:
    delay = {4: 0.005}
    rtts = [(a, b, 40e-6 + 2 * (delay.get(a, 0) + delay.get(b, 0))) for a, b in rtt_pairs(6)]
    found = delayed_nodes(rtts)
    assert [(s.kind, s.id) for s in found] == [("node", "n4")]
    assert found[0].slowdown == pytest.approx(0.005, rel=1e-3)
    assert delayed_nodes([(a, b, 40e-6) for a, b in rtt_pairs(6)]) == []


def test_emulation_plan_builds_the_degraded_parts_in() -> None:
    from pathlib import Path

    from slowlink.emulate.plan import build_plan
    from slowlink.spec.cluster import load_cluster
    from slowlink.straggler.degraded import healthy

    c = load_cluster(Path(__file__).parents[2] / "examples" / "straggler-emulate.yaml")
    plan = build_plan(c, run_id="swtest")
    assert plan.link("n1").rate_bytes_s == pytest.approx(plan.node_rate_bytes_s * 0.5)
    assert plan.link("n4").delay_s == pytest.approx(0.005) and plan.link("n0").delay_s == 0
    assert build_plan(c, run_id="swtest", delay_s={"n4": 0.001}).link("n4").delay_s == pytest.approx(0.001)
    clean = build_plan(healthy(c), run_id="swtest")
    assert all(x.rate_bytes_s == clean.node_rate_bytes_s and not x.delay_s for x in clean.links)


def test_found_parts_become_degraded_parts() -> None:
    from slowlink.probe.find import Suspect
    from slowlink.probe.slow import parts_from_suspects

    parts = parts_from_suspects([Suspect("link", "n1", "", 0.49), Suspect("node", "n4", "", 0.0052, "delay_s"),
                                 Suspect("link", "n2r0", "", 1.3), Suspect("rank", "rank 3", "", 0.2, "slower")])
    assert (parts[0].node, parts[0].nic, parts[0].rate) == (1, 0, 0.49)
    assert (parts[1].node, parts[1].delay_ms) == (4, pytest.approx(5.2))
    assert (parts[2].node, parts[2].rate) == (2, 1.0) and len(parts) == 3


def test_slow_ranks_names_a_rank_or_a_whole_host() -> None:
    from slowlink.probe.find import slow_ranks

    assert slow_ranks([0.1] * 8) == [] and slow_ranks([0.1]) == []
    (s,) = slow_ranks([0.1, 0.1, 0.1, 0.2], ["a", "a", "b", "b"])
    assert (s.kind, s.id, s.words()) == ("rank", "rank 3", "+100% slower") and "on b" in s.evidence
    (s,) = slow_ranks([0.1, 0.1, 0.1, 0.1, 0.12, 0.13], ["a", "a", "c", "c", "b", "b"])
    assert (s.kind, s.id) == ("node", "b")
    assert slow_ranks([0.2, 0.2], ["a", "a"]) == []  # every rank alike: nothing to compare with


def _sweep(waits: list[float], time_s: float = 3e-3, sizes: int = 2) -> list[CollectiveRow]:
    n = len(waits)
    return [CollectiveRow(op="all_reduce", size_bytes=2**k, ranks=n, time_s=time_s, busbw_gbyte_s=1.0,
                          rank_time_s=[time_s] * n, rank_wait_s=list(waits)) for k in range(20, 20 + sizes)]


def test_late_ranks_names_the_rank_that_waits_least_or_its_whole_host() -> None:
    from slowlink.probe.find import late_ranks

    # Rank 2 arrives 2 ms late into a 1 ms collective: the others wait 3 ms, it waits 1 ms; the loop would
    # take 1 ms without it, so it costs +200%.
    (s,) = late_ranks(_sweep([3e-3, 3e-3, 1e-3, 3e-3]), ["a", "a", "b", "b"])
    assert (s.kind, s.id, s.unit) == ("rank", "rank 2", "slower") and s.slowdown == pytest.approx(2.0)
    assert "arrives 2.00 ms late" in s.evidence and "on b" in s.evidence
    (s,) = late_ranks(_sweep([3e-3, 3e-3, 1e-3, 1.2e-3]), ["a", "a", "b", "b"])
    assert (s.kind, s.id) == ("node", "b")
    assert late_ranks(_sweep([3e-3, 2.9e-3, 3e-3])) == []  # 0.1 ms of skew in 3 ms: under 10%
    assert late_ranks(_sweep([1e-3])) == []  # one rank: nothing to compare with
