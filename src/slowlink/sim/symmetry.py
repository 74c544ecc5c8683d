"""Solving a phase fast: split its flows into link-disjoint components and simulate each distinct one once.

Shortcut (exact): flows of two components share no link, so max-min fairness treats them independently;
two components with the same *signature* (the same flows in the same order, with the same sizes, over
links relabelled by first use that have the same capacities and latencies) give identical results. So
a phase of 2,048 TP groups, each inside its own scale-up domain, costs one 8-rank simulation. It holds for
any traffic; it saves time only when components repeat (identical groups over identical links).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from slowlink.sim.batched import component_drains
from slowlink.sim.engine import Flow, SimResult, _incidence, simulate


@dataclass(frozen=True)
class Solved:
    """The slowest drain (s, from the phase's start), the distinct components simulated, the largest one's
    result (for link statistics) and the number of components."""

    drain_s: float
    simulated: int
    components: int
    largest: SimResult | None


def _components(flows: list[Flow], n_links: int) -> tuple[int, np.ndarray]:
    inc = _incidence([f.path for f in flows], n_links)
    n = len(flows)
    adj = sp.bmat([[None, inc], [inc.T, None]], format="csr")
    k, labels = connected_components(adj, directed=False)
    return k, labels[:n]


def solve(capacity: list[float], latency: list[float], flows: list[Flow]) -> Solved:
    """Simulate ``flows`` (all starting at 0) component by component, each distinct component once."""
    if not flows:
        return Solved(0.0, 0, 0, None)
    if len(flows) < 512:
        res = simulate(capacity, latency, flows)
        return Solved(float(res.drain_s.max()), 1, 1, res)
    k, labels = _components(flows, len(capacity))
    members: list[list[int]] = [[] for _ in range(k)]
    for i, lab in enumerate(labels):
        members[lab].append(i)
    cache: dict[tuple[object, ...], float] = {}
    worst, largest, largest_n = 0.0, None, -1
    for idx in members:
        if not idx:
            continue
        relabel: dict[int, int] = {}
        paths = []
        for i in idx:
            paths.append(tuple(relabel.setdefault(link, len(relabel)) for link in flows[i].path))
        links = sorted(relabel, key=relabel.__getitem__)
        sig = (tuple(paths), tuple(flows[i].size_bytes for i in idx),
               tuple(capacity[x] for x in links), tuple(latency[x] for x in links))
        if sig not in cache:
            sub = [Flow(p, flows[i].size_bytes, 0.0, flows[i].tag) for p, i in zip(paths, idx, strict=True)]
            res = simulate([capacity[x] for x in links], [latency[x] for x in links], sub)
            cache[sig] = float(res.drain_s.max()) if sub else 0.0
            if len(idx) > largest_n:
                largest, largest_n = res, len(idx)
        worst = max(worst, cache[sig])
    return Solved(worst, len(cache), k, largest)


def padded_incidence(links: np.ndarray, n_links: int) -> sp.csr_matrix:
    """The engine's flow x link incidence of paths given as rows of link ids padded with -1."""
    keep = links >= 0
    rows = np.repeat(np.arange(links.shape[0]), keep.sum(axis=1))
    m = sp.csr_matrix((np.ones(int(keep.sum())), (rows, links[keep])), shape=(links.shape[0], n_links))
    m.sum_duplicates()
    m.data[:] = 1.0  # a path that crosses a link twice still takes one share of it (the engine's shortcut)
    return m


def drain_s(capacity: list[float], latency: list[float], links: np.ndarray, size_bytes: np.ndarray) -> float:
    """:func:`solve`'s ``drain_s`` of flows given as padded link rows and sizes (all starting at 0): the same
    number, from every link-disjoint component advanced together (:func:`~slowlink.sim.batched.component_drains`)
    instead of one engine run per distinct component."""
    n = links.shape[0]
    if n == 0:
        return 0.0
    if n < 512:
        flows = [Flow(tuple(x for x in row if x >= 0), s) for row, s in zip(links.tolist(), size_bytes.tolist(),
                                                                            strict=True)]
        return solve(capacity, latency, flows).drain_s
    inc = padded_incidence(links, len(capacity))
    adj = sp.bmat([[None, inc], [inc.T, None]], format="csr")
    k, labels = connected_components(adj, directed=False)
    return float(component_drains(inc, size_bytes, np.asarray(capacity), labels[:n].astype(np.int64), k).max())
