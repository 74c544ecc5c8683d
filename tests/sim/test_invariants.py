"""Invariants over every topology x collective: capacity, conservation, causality, determinism."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from slowlink import units
from slowlink.sim.engine import simulate
from slowlink.sim.flows import phases
from slowlink.spec.cluster import Cluster
from slowlink.topology.build import build

CASES = [("all_reduce", "ring"), ("all_reduce", "tree"), ("all_reduce", "nvls"),
         ("all_reduce", "hierarchical"), ("all_gather", "ring"), ("reduce_scatter", "hierarchical"),
         ("all_to_all", "p2p"), ("send_recv", "p2p")]


@pytest.mark.parametrize(("op", "algorithm"), CASES)
def test_invariants(topology: str, op: str, algorithm: str, topology_cluster: Callable[[str], Cluster]) -> None:
    c = topology_cluster(topology)
    topo = build(c)
    ranks = list(range(c.gpus))
    groups = [[0, c.gpus - 1], [1, c.gpus // 2]] if op == "send_recv" else [ranks[: c.gpus // 2],
                                                                              ranks[c.gpus // 2:]]
    for ph in phases(topo, op, algorithm, groups, 64 * units.MiB):
        r = simulate(topo.capacity_bytes_s, topo.latency_s, ph.flows)
        assert r.link_rate_bytes_s is not None
        assert (r.link_rate_bytes_s <= r.link_capacity_bytes_s * (1 + 1e-9)).all()
        expected = np.zeros(len(topo.capacity_bytes_s))
        for f in ph.flows:
            for link in set(f.path):
                expected[link] += f.size_bytes
        np.testing.assert_allclose(r.link_bytes, expected, rtol=1e-6, atol=1e-3)
        assert (r.finish_s > r.start_s).all()
        again = simulate(build(c).capacity_bytes_s, topo.latency_s,
                         phases(build(c), op, algorithm, groups, 64 * units.MiB)[0].flows)
        first = simulate(topo.capacity_bytes_s, topo.latency_s,
                         phases(topo, op, algorithm, groups, 64 * units.MiB)[0].flows)
        np.testing.assert_array_equal(first.finish_s, again.finish_s)
