"""Phases built as arrays (sim.arrays) are the per-flow builders' phases: the same flows in the same order, the
same sizes and per-step latency, so the step model's flow costs are equal to the last bit, on every topology."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from slowlink import units
from slowlink.sim.engine import Flow
from slowlink.sim.flows import ring_phase, send_recv_phase
from slowlink.sim.phase import Phase, lockstep_drain_s, phase_drain
from slowlink.sim.symmetry import drain_s, solve
from slowlink.sim.trees import tree_phase
from slowlink.spec.cluster import Cluster
from slowlink.spec.workload import Parallel
from slowlink.topology.build import build
from slowlink.topology.fabric import Topology
from slowlink.workload.placement import dimension_groups

LAYOUTS = [Parallel.of(tp=2, dp=16), Parallel.of(tp=4, dp=8), Parallel.of(tp=2, pp=4, dp=4),
           Parallel.of(tp=1, dp=32), Parallel.of(tp=4, pp=2, dp=4, order="tp-cp-pp-dp")]


def _same(a: Phase, b: Phase) -> None:
    assert a.arrays is not None and b.arrays is None
    m = a.materialize()
    assert [f.path for f in m.flows] == [f.path for f in b.flows]
    assert [f.size_bytes for f in m.flows] == [f.size_bytes for f in b.flows]
    assert m.group_of == b.group_of
    assert a.step_latency_s == b.step_latency_s
    assert a.fill_fraction == b.fill_fraction


def _built_as_arrays(topo: Topology, layouts: list[Parallel], dims: tuple[str, ...],
                     make: Callable[[list[list[int]], bool], Phase]) -> int:
    """Every layout's groups of ``dims`` made by ``make(groups, arrays)`` both ways: the same flows, latency, fill and
    drain where the arrays apply, the per-flow phase itself elsewhere. Returns how many were built as arrays."""
    built = 0
    for p in layouts:
        for dim in dims:
            groups = dimension_groups(p, dim)  # type: ignore[arg-type]
            if len(groups[0]) < 2:
                continue
            fast, slow = make(groups, True), make(groups, False)
            if fast.arrays is None:  # outside the regular case: the per-flow phase itself
                assert fast.flows and fast.step_latency_s == slow.step_latency_s
                continue
            built += 1
            _same(fast, slow)
            assert lockstep_drain_s(topo, fast.arrays) == phase_drain(topo, slow)[0]
    return built


@pytest.mark.parametrize("size", [4.0, float(units.MiB), 3.0 * units.GiB])
def test_tree_arrays_are_the_tree_flows(topology: str, topology_cluster: Callable[[str], Cluster],
                                        size: float) -> None:
    topo = build(topology_cluster(topology))
    built = _built_as_arrays(topo, [*LAYOUTS, Parallel.of(tp=8, dp=4), Parallel.of(tp=1, cp=2, dp=16)],
                             ("tp", "dp", "pp", "world"), lambda g, arrays: tree_phase(topo, g, size, arrays=arrays))
    if topology not in ("dragonfly-ecmp", "dragonfly-spray", "nvl-spanning-nodes"):
        assert built > 0


def test_ring_arrays_are_the_ring_flows(topology: str, topology_cluster: Callable[[str], Cluster]) -> None:
    topo = build(topology_cluster(topology))
    built = _built_as_arrays(topo, LAYOUTS, ("tp", "dp", "pp"),
                             lambda g, arrays: ring_phase(topo, g, units.MiB, 3, arrays=arrays))
    if topology not in ("dragonfly-ecmp", "dragonfly-spray", "nvl-spanning-nodes"):
        assert built > 0


def test_send_recv_arrays_are_the_pair_flows(topology: str, topology_cluster: Callable[[str], Cluster]) -> None:
    c = topology_cluster(topology)
    topo = build(c)
    for p in (Parallel.of(tp=2, pp=4, dp=4), Parallel.of(tp=1, pp=8, dp=4), Parallel.of(tp=4, pp=8)):
        pp = np.asarray(dimension_groups(p, "pp"))
        pairs = np.stack((pp[:, :-1], pp[:, 1:]), axis=2).reshape(-1, 2).tolist()
        fast = send_recv_phase(topo, pairs, units.MiB, arrays=True)
        slow = send_recv_phase(topo, pairs, units.MiB)
        if fast.arrays is None:
            continue
        _same(fast, slow)
        got = solve(topo.capacity_bytes_s, topo.latency_s, fast.materialize().flows).drain_s
        assert got == solve(topo.capacity_bytes_s, topo.latency_s, slow.flows).drain_s


@pytest.mark.parametrize("routing", ["ecmp", "dmodk", "adaptive"])
def test_three_tier_rails_with_pods(make_cluster: Callable[..., Cluster], routing: str) -> None:
    # 3 tiers with several pods and 1:2 at the top: inter-pod, intra-pod and intra-leaf paths all occur
    c = make_cluster(nodes=32, gpn=4, nics=4, topology="rail-optimized", tiers=3, switch_radix=4,
                     oversubscription=[1, 1, 2], routing=routing)
    topo = build(c)
    for dim in ("dp", "pp"):
        groups = dimension_groups(Parallel.of(tp=2, pp=4, dp=16), dim)  # type: ignore[arg-type]
        fast, slow = ring_phase(topo, groups, units.MiB, 1, arrays=True), ring_phase(topo, groups, units.MiB, 1)
        _same(fast, slow)


@pytest.mark.parametrize("routing", ["ecmp", "adaptive"])
def test_components_advanced_together_drain_as_alone(make_cluster: Callable[..., Cluster], routing: str) -> None:
    # > 512 flows: split into link-disjoint components; every component on its own clock, all at once
    c = make_cluster(nodes=128, gpn=8, nics=8, topology="rail-optimized", tiers=3, switch_radix=8,
                     oversubscription=[1, 1, 4], routing=routing)
    topo = build(c)
    pp = np.asarray(dimension_groups(Parallel.of(tp=8, pp=8, dp=16), "pp"))
    pairs = np.stack((pp[:, :-1], pp[:, 1:]), axis=2).reshape(-1, 2).tolist()
    fast = send_recv_phase(topo, pairs, units.MiB, arrays=True)
    assert fast.arrays is not None and len(fast.arrays) >= 512
    alone = solve(topo.capacity_bytes_s, topo.latency_s, fast.materialize().flows)
    assert alone.components > 1
    assert drain_s(topo.capacity_bytes_s, topo.latency_s, fast.arrays.links, fast.arrays.size_bytes) == alone.drain_s


def test_random_components_drain_as_alone() -> None:
    rng = np.random.default_rng(7)
    for _ in range(20):
        n_links = int(rng.integers(20, 200))
        cap = rng.choice([1.0, 2.0, 3.0, 10.0 / 7], n_links) * 1e9
        paths = [tuple(int(x) for x in rng.choice(n_links, size=int(rng.integers(0, 5)), replace=False))
                 for _ in range(int(rng.integers(512, 900)))]
        sizes = rng.choice([1e6, 3e6, 2.5e6], len(paths))
        links = np.full((len(paths), 4), -1, dtype=np.int64)
        for i, p in enumerate(paths):
            links[i, :len(p)] = p
        flows = [Flow(p, s) for p, s in zip(paths, sizes.tolist(), strict=True)]
        lat = [0.0] * n_links
        assert drain_s(cap.tolist(), lat, links, sizes) == solve(cap.tolist(), lat, flows).drain_s
