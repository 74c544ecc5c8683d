"""Invariants over every topology x collective: capacity, conservation, causality, determinism."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
def test_invariants(topology: str, op: str, algorithm: str, topology_cluster: Callable[[str], Cluster],
                    simulated_phase: Callable[..., Any]) -> None:
    c = topology_cluster(topology)
    topo = build(c)
    ranks = list(range(c.gpus))
    groups = [[0, c.gpus - 1], [1, c.gpus // 2]] if op == "send_recv" else [ranks[: c.gpus // 2],
                                                                              ranks[c.gpus // 2:]]
    for ph in phases(topo, op, algorithm, groups, 64 * units.MiB):
        simulated_phase(topo, ph.flows)
        again = simulate(build(c).capacity_bytes_s, topo.latency_s,
                         phases(build(c), op, algorithm, groups, 64 * units.MiB)[0].flows)
        first = simulate(topo.capacity_bytes_s, topo.latency_s,
                         phases(topo, op, algorithm, groups, 64 * units.MiB)[0].flows)
        np.testing.assert_array_equal(first.finish_s, again.finish_s)
