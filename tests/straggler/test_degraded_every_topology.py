"""Shared invariant over every topology variant: a NIC at half rate slows a communicator that crosses it
by 1x to 2x in both models, and by the same factor wherever the two models agree on the healthy time.

The communicator is one rank per node on nodes of 2 NICs: both models send a GPU's traffic by its own NIC
only (NCCL's local NICs, :func:`slowlink.topology.nic.affine_nics`), so they agree on the healthy time
except where the flow model alone sees something (:data:`DIFFER`, each with its reason)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from slowlink.sim.step import flow_cost
from slowlink.spec.cluster import Cluster
from slowlink.spec.degraded import DegradedPart, resolve_degraded
from slowlink.straggler.degraded import healthy
from slowlink.topology.build import build
from slowlink.workload.comm import analytical_cost

SIZE = 256 * 2**20

# (topology, op) -> why the flow model is slower there (the analytical model spreads traffic evenly). An NVLink
# domain spanning nodes agrees since both models leave it by every node's NICs (communicator.domain_channels).
DIFFER = {
    ("fat2-4to1-ecmp", "all_to_all"): "ECMP hash collisions on the 4:1 leaf uplinks",
    ("rail3", "all_to_all"): "static routing collisions in the rail planes' pod tier",
    ("dragonfly-ecmp", "all_reduce"): "ECMP hash collisions on the global links",
    ("fragmented", "all_reduce"): "D-mod-K on a fragmented ring is not a shift permutation: collisions",
}


@pytest.mark.parametrize("op", ["all_reduce", "all_to_all"])
def test_half_rate_nic_in_both_models(topology: str, topology_cluster: Callable[[str], Cluster], op: str) -> None:
    base = topology_cluster(topology)
    topo = build(base)
    gpn = base.gpus_per_node
    group = [[r * gpn for r in range(base.nodes)]]  # local GPU 0 of every rank block: one rank per node
    node, nic = topo.node_of(group[0][1]), topo.affine_nics(group[0][1])[0]
    part = DegradedPart(node=node, nic=nic, rate=0.5)
    slow = replace(base, degraded=resolve_degraded([part], gpn))
    factors, healthy_s = [], []
    for cost_of in (analytical_cost, flow_cost):
        healthy_s.append(cost_of(healthy(slow))(op, SIZE, group))
        f = cost_of(slow)(op, SIZE, group) / healthy_s[-1]
        assert 1.0 <= f <= 2.0 + 1e-9, (cost_of.__name__, f)
        factors.append(f)
    agree = healthy_s[1] == pytest.approx(healthy_s[0], rel=0.1)
    assert agree != ((topology, op) in DIFFER), (healthy_s, DIFFER.get((topology, op), "should agree"))
    if agree:
        assert factors[1] == pytest.approx(factors[0], rel=0.1), factors
    last = gpn - 1  # the last local GPU sits on another rail (when there are two): it never touches the slow NIC
    other = [[r * gpn + last for r in range(base.nodes)]] if nic not in topo.affine_nics(last) else None
    if other is not None:
        assert analytical_cost(slow)(op, SIZE, other) == pytest.approx(analytical_cost(healthy(slow))(op, SIZE, other))
