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

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from slowlink.sim.collectives import choose_algorithm
from slowlink.sim.flows import phases
from slowlink.sim.phase import Phase, lockstep_drain_s, phase_drain
from slowlink.sim.symmetry import drain_s, solve
from slowlink.spec.cluster import Cluster
from slowlink.topology.build import build
from slowlink.topology.fabric import Topology
from slowlink.workload.comm import group_key

CostFn = Callable[[str, float, Sequence[list[int]]], float]


def _drain_s(topo: Topology, ph: Phase) -> float:
    """Slowest drain of one phase: lockstep when pipelined, else distinct components through the engine."""
    if ph.pipelined:
        return lockstep_drain_s(topo, ph.arrays) if ph.arrays is not None else phase_drain(topo, ph)[0]
    if ph.arrays is not None:
        return drain_s(topo.capacity_bytes_s, topo.latency_s, ph.arrays.links, ph.arrays.size_bytes)
    return solve(topo.capacity_bytes_s, topo.latency_s, ph.flows).drain_s


# algorithms whose every flow carries a fixed fraction of the buffer and whose phases' latency and fill do not
# depend on its size: their drains scale with it (tree and NVLS fills, and NVLS rates, depend on the size)
_LINEAR = ("ring", "hierarchical")


@dataclass(frozen=True)
class _Timed:
    """One priced collective's phases (steps, fill, per-step latency) and drains, at ``size_bytes``."""

    size_bytes: float
    phases: tuple[tuple[int, float, float], ...]
    drains_s: tuple[float, ...]

    def time_s(self, scale: float = 1.0) -> float:
        total = 0.0
        for (steps, fill, lat), drain in zip(self.phases, self.drains_s, strict=True):
            total += steps * (drain * scale * (1.0 + fill) + lat)  # phase.time_from_drain_s
        return total


def _power_of_two(ratio: float) -> bool:
    """True when scaling by ``ratio`` is exact in binary floating point (a power of two)."""
    return ratio > 0 and math.frexp(ratio)[0] == 0.5


def flow_cost(cluster: Cluster, topo: Topology | None = None) -> CostFn:
    """A cost function ``cost(op, size_bytes, groups) -> seconds`` backed by the flow simulator.

    Cached by value: per ``(op, size_bytes, groups)`` (the groups named by
    :func:`~slowlink.workload.comm.group_key`), and per ``(op, algorithm, groups)`` the drains of the first size
    priced, which a size a power of two away reuses when every flow carries a fixed fraction of the buffer (ring,
    hierarchical, send_recv, all_to_all): the max-min engine and the lockstep solver give every time scaled by
    exactly that power of two (each of their operations scales exactly), so an advice re-run with FP8 gradients or
    a doubled micro-batch simulates nothing again."""
    tp = topo or build(cluster)
    cache: dict[tuple[str, float, object], float] = {}
    timed: dict[tuple[str, str, object], _Timed] = {}

    def cost(op: str, size_bytes: float, groups: Sequence[list[int]]) -> float:
        key = (op, float(size_bytes), group_key(groups))
        hit = cache.get(key)
        if hit is not None:
            return hit
        gl = [list(g) for g in groups if len(g) > 1]
        if size_bytes <= 0 or not gl:
            return 0.0
        algo = choose_algorithm(cluster, tp, op, size_bytes, gl).algorithm
        linear = algo in _LINEAR or op in ("send_recv", "all_to_all")
        base = timed.get((op, algo, key[2])) if linear else None
        if base is not None and _power_of_two(size_bytes / base.size_bytes):
            cache[key] = base.time_s(size_bytes / base.size_bytes)
            return cache[key]
        phs = phases(tp, op, algo, gl, size_bytes, arrays=True)
        t = _Timed(float(size_bytes), tuple((ph.steps, ph.fill_fraction, ph.step_latency_s) for ph in phs),
                   tuple(_drain_s(tp, ph) for ph in phs))
        if linear:
            timed.setdefault((op, algo, key[2]), t)
        cache[key] = t.time_s()
        return cache[key]

    return cost
