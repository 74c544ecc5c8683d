"""The flow simulator as the step model's collective cost: ``flow_cost(cluster)(op, size_bytes, groups)``.

``groups`` are every concurrent communicator of one parallel dimension, as lists of ranks (Megatron order,
:func:`slowlink.workload.placement.dimension_groups`); ranks map to GPUs through the cluster placement, as
the topology does. For ``send_recv`` each group is ``[src_rank, dst_rank]``. All groups run at once and
contend on shared links. The cost is the time until every group has finished, in seconds.

Shortcuts, each exact where stated:

* the algorithm is the analytical model's pick for one group (``predict(...).algorithm``), expanded into
  phases by :mod:`slowlink.sim.flows` (ring steps simulated once and repeated: exact when the steps are
  identical, i.e. no other traffic shares the links during the collective);
* a pipelined phase (ring, tree, NVLS) is timed by the lockstep model (:mod:`slowlink.sim.lockstep`): one
  sparse groups x links load matrix, closed form for groups that share no link, max-min fair progress
  between groups that do (exact for that model; events = distinct group finishes, not flows);
* a phase of independent transfers (all_to_all, send_recv) is split into link-disjoint components and every
  distinct component is simulated once (:mod:`slowlink.sim.symmetry`; exact);
* results are cached per ``(op, size_bytes, groups)`` for the life of the returned function (exact).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from slowlink.sim.collectives import choose_algorithm
from slowlink.sim.flows import phases
from slowlink.sim.phase import Phase, lockstep_drain_s, phase_drain, time_from_drain_s
from slowlink.sim.symmetry import drain_s, solve
from slowlink.spec.cluster import Cluster
from slowlink.topology.build import build
from slowlink.topology.fabric import Topology

CostFn = Callable[[str, float, Sequence[list[int]]], float]


def _drain_s(topo: Topology, ph: Phase) -> float:
    """Slowest drain of one phase: lockstep when pipelined, else distinct components through the engine."""
    if ph.pipelined:
        return lockstep_drain_s(topo, ph.arrays) if ph.arrays is not None else phase_drain(topo, ph)[0]
    if ph.arrays is not None:
        return drain_s(topo.capacity_bytes_s, topo.latency_s, ph.arrays.links, ph.arrays.size_bytes)
    return solve(topo.capacity_bytes_s, topo.latency_s, ph.flows).drain_s


def flow_cost(cluster: Cluster, topo: Topology | None = None) -> CostFn:
    """A cost function ``cost(op, size_bytes, groups) -> seconds`` backed by the flow simulator."""
    tp = topo or build(cluster)
    cache: dict[tuple[str, float, tuple[tuple[int, ...], ...]], float] = {}

    def cost(op: str, size_bytes: float, groups: Sequence[list[int]]) -> float:
        groups = [list(g) for g in groups if len(g) > 1]
        if size_bytes <= 0 or not groups:
            return 0.0
        key = (op, float(size_bytes), tuple(tuple(g) for g in groups))
        if key not in cache:
            algo = choose_algorithm(cluster, tp, op, size_bytes, groups).algorithm
            total = 0.0
            for ph in phases(tp, op, algo, groups, size_bytes, arrays=True):
                total += time_from_drain_s(ph, _drain_s(tp, ph))
            cache[key] = total
        return cache[key]

    return cost
