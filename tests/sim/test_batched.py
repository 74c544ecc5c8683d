"""The batched solver gives every component the drain the flow engine gives it alone, to the last bit."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from slowlink.sim.batched import _MAX_CLASSES, component_drains, same_users
from slowlink.sim.engine import Flow, simulate
from slowlink.sim.symmetry import padded_incidence


def _alone_and_batched(links: np.ndarray, size: np.ndarray, cap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per component: the engine's drain run on it alone, and component_drains' (all at once)."""
    n = links.shape[0]
    inc = padded_incidence(links, cap.size)
    k, labels = connected_components(sp.bmat([[None, inc], [inc.T, None]], format="csr"), directed=False)
    comp = labels[:n].astype(np.int64)
    alone = np.zeros(k)
    for c in np.unique(comp):
        idx = np.flatnonzero(comp == c)
        flows = [Flow(tuple(int(x) for x in links[i] if x >= 0), float(size[i])) for i in idx]
        res = simulate(cap, np.zeros(cap.size), flows)
        alone[c] = res.drain_s.max()
    return alone, component_drains(inc, size, cap, comp, k)


def _random_case(rng: np.random.Generator, private: bool, twins: bool, distinct_caps: bool
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n_links, n_flows, hops = int(rng.integers(5, 300)), int(rng.integers(1, 400)), int(rng.integers(1, 5))
    cap = rng.choice([1.0, 2.0, 3.0, 10.0 / 7, 0.5], n_links) * 1e9
    links = np.full((n_flows, hops), -1, dtype=np.int64)
    for i in range(n_flows):
        h = int(rng.integers(0, hops + 1))
        links[i, :h] = rng.choice(n_links, size=h, replace=False)
    if private:  # two links of each flow's own (a NIC's up and down), of a few capacities
        own = np.arange(cap.size, cap.size + 2 * n_flows).reshape(n_flows, 2)
        links, cap = np.concatenate((links, own), axis=1), np.concatenate((cap, rng.choice([1.0, 4.0], 2 * n_flows)
                                                                              * 1e9))
    if twins:  # every link doubled: the same flows cross both
        links = np.concatenate((links, np.where(links >= 0, links + cap.size, -1)), axis=1)
        cap = np.concatenate((cap, cap))
    if distinct_caps:  # more capacities than classes: the rarest stay links when one flow crosses them
        cap = rng.uniform(0.5, 3.0, cap.size) * 1e9
    size = rng.choice([1e6, 3e6, 2.5e6], n_flows) if rng.random() < 0.5 else np.full(n_flows, 1e6)
    return links, size, cap


@pytest.mark.parametrize("seed", range(4))
def test_every_component_drains_as_alone(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for trial in range(8):
        links, size, cap = _random_case(rng, private=trial % 2 == 0, twins=trial % 3 == 0,
                                        distinct_caps=trial % 4 == 3)
        alone, batched = _alone_and_batched(links, size, cap)
        assert np.array_equal(alone, batched)


def test_more_capacities_than_classes() -> None:
    rng = np.random.default_rng(3)
    links, size, cap = _random_case(rng, private=True, twins=False, distinct_caps=True)
    assert np.unique(cap).size > _MAX_CLASSES
    alone, batched = _alone_and_batched(links, size, cap)
    assert np.array_equal(alone, batched)


def test_same_users_merges_only_identical_sets() -> None:
    # links 0 and 2: flows {0, 1}, capacity 1; link 1: the same flows, capacity 2; link 3: flows {0, 2}, capacity 1
    row = np.array([0, 0, 0, 0, 1, 1, 1, 2])
    col = np.array([0, 1, 2, 3, 0, 1, 2, 3])
    cap = np.array([1.0, 2.0, 1.0, 1.0])
    assert same_users(row, col, cap).tolist() == [0, 1, 0, 3]
