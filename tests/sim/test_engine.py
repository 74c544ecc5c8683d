"""Invariants of the flow engine: capacity, conservation, causality, determinism, closed forms."""

from __future__ import annotations

import numpy as np

from slowlink.sim.engine import Flow, _incidence, max_min_rates, simulate


def _random_case(seed: int) -> tuple[np.ndarray, np.ndarray, list[Flow]]:
    rng = np.random.default_rng(seed)
    n_links = 12
    cap = rng.uniform(1.0, 10.0, n_links)
    lat = rng.uniform(0.0, 0.01, n_links)
    flows = [
        Flow(tuple(int(x) for x in rng.choice(n_links, size=rng.integers(1, 4), replace=False)),
             float(rng.uniform(1, 20)), float(rng.uniform(0, 2)))
        for _ in range(40)
    ]
    return cap, lat, flows


def test_no_link_above_capacity_at_any_instant() -> None:
    for seed in range(5):
        cap, lat, flows = _random_case(seed)
        r = simulate(cap, lat, flows)
        assert r.link_rate_bytes_s is not None
        assert (r.link_rate_bytes_s <= cap * (1 + 1e-9)).all()


def test_bytes_conserved_and_flows_finish_after_start() -> None:
    for seed in range(5):
        cap, lat, flows = _random_case(seed)
        r = simulate(cap, lat, flows)
        expected = np.zeros(cap.size)
        for f in flows:
            for link in f.path:
                expected[link] += f.size_bytes
        np.testing.assert_allclose(r.link_bytes, expected, rtol=1e-6)
        assert (r.finish_s > r.start_s).all()


def test_same_input_same_result() -> None:
    cap, lat, flows = _random_case(7)
    a, b = simulate(cap, lat, flows), simulate(cap, lat, flows)
    np.testing.assert_array_equal(a.finish_s, b.finish_s)


def test_max_min_is_fair_on_the_classic_example() -> None:
    # Two links of capacity 1: flow 0 crosses both, flows 1 and 2 one each -> all get 1/2... then
    # flow 1 and 2 share with flow 0 only; add a third flow on link 0 so link 0 saturates first.
    inc = _incidence([(0, 1), (0,), (0,), (1,)], 2)
    rates = max_min_rates(inc, np.array([3.0, 3.0]))
    np.testing.assert_allclose(rates, [1.0, 1.0, 1.0, 2.0])


def test_single_flow_matches_size_over_bandwidth_plus_latency() -> None:
    r = simulate([4.0, 8.0], [0.5, 0.25], [Flow((0, 1), 100.0)])
    assert abs(r.finish_s[0] - (100.0 / 4.0 + 0.75)) < 1e-9


def test_staggered_arrival_reshares() -> None:
    r = simulate([10.0, 10.0], [0.0, 0.0], [Flow((0,), 10.0), Flow((0, 1), 10.0), Flow((1,), 5.0, 0.5)])
    np.testing.assert_allclose(r.finish_s, [2.0, 2.0, 1.5])
