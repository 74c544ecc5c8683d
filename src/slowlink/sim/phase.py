"""A phase of a collective: flows that run at once, repeated ``steps`` times, and how to time it.

``flows[i]`` belongs to group ``group_of[i]`` (an index into the concurrent communicators). A *pipelined*
phase (ring, tree, NVLS) is timed by the lockstep model (:mod:`slowlink.sim.lockstep`): each group's flows
advance together at the pace of its hottest link. A phase of independent transfers (all_to_all,
send_recv) is timed by the max-min flow engine (:mod:`slowlink.sim.engine`), flow by flow.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from slowlink.sim import lockstep
from slowlink.sim.arrays import FlowArrays
from slowlink.sim.engine import Flow, SimResult, simulate
from slowlink.topology.fabric import Paths, Topology


@dataclass
class Phase:
    """Flows that run at once, ``steps`` times, each step also paying ``step_latency_s``; a pipelined tree
    also pays its fill, ``fill_fraction`` of its drain (the analytical model's, ``tree_fill_fraction``)."""

    flows: list[Flow] = field(default_factory=list)
    steps: int = 1
    step_latency_s: float = 0.0
    fill_fraction: float = 0.0
    name: str = ""
    group_of: list[int] = field(default_factory=list)
    pipelined: bool = True
    arrays: FlowArrays | None = None  # the flows as arrays instead (sim.arrays): flows and group_of stay empty

    def materialize(self) -> Phase:
        """This phase with its :attr:`arrays` as :attr:`flows` and :attr:`group_of` (itself if it has none)."""
        if self.arrays is None:
            return self
        a = self.arrays
        paths = [tuple(x for x in row if x >= 0) for row in a.links.tolist()]
        flows = [Flow(pth, s, 0.0, self.name) for pth, s in zip(paths, a.size_bytes.tolist(), strict=True)]
        return Phase(flows, self.steps, self.step_latency_s, self.fill_fraction, self.name, a.group.tolist(),
                     self.pipelined)

    def add(self, paths: Paths, size_bytes: float, tag: str, group: int) -> None:
        """One transfer of ``size_bytes`` of ``group``, split over weighted ``paths``."""
        for w, p in paths:
            self.flows.append(Flow(p, size_bytes * w, 0.0, tag))
            self.group_of.append(group)

    @property
    def groups(self) -> int:
        return max(self.group_of, default=-1) + 1


def path_latency(topo: Topology, paths: Paths) -> float:
    """The slowest of ``paths``' summed link latencies (s)."""
    return max((sum(topo.latency_s[i] for i in p) for _, p in paths), default=0.0)


def ring_order(topo: Topology, ranks: list[int]) -> list[int]:
    """The ring NCCL would build, as the analytical model counts it (``collectives.communicator.place``):
    scale-up domains in the order of their lowest rank (NCCL connects nodes by rank, knowing nothing of
    leaves), a domain's ranks together in rank order. A fragmented placement therefore zig-zags."""
    first: dict[int, int] = {}
    for r in sorted(ranks):
        first.setdefault(topo.domain_of(r), r)
    return sorted(ranks, key=lambda r: (first[topo.domain_of(r)], r))


def domains(topo: Topology, ranks: list[int]) -> list[list[int]]:
    """The group's ranks per scale-up domain, in ring order (NCCL's "nodes")."""
    by: dict[int, list[int]] = {}
    for r in ring_order(topo, ranks):
        by.setdefault(topo.domain_of(r), []).append(r)
    return list(by.values())


def lockstep_result(topo: Topology, ph: Phase) -> tuple[float, SimResult]:
    """Slowest group's drain (s) of a pipelined phase, and an engine-style result (one constant-rate
    interval per group finish; every flow of a group finishes with its group)."""
    cap = np.asarray(topo.capacity_bytes_s, dtype=np.float64)
    paths = [f.path for f in ph.flows]
    load = lockstep.group_loads(paths, [f.size_bytes for f in ph.flows], ph.group_of, ph.groups, cap.size)
    sol = lockstep.solve(cap, load)
    lat = np.asarray(topo.latency_s, dtype=np.float64)
    drain = sol.finish_s[np.asarray(ph.group_of, dtype=np.int64)] if ph.flows else np.zeros(0)
    tail = np.fromiter((lat[list(p)].sum() for p in paths), dtype=np.float64, count=len(paths))
    end = float(sol.finish_s.max(initial=0.0))
    res = SimResult(start_s=np.zeros(len(paths)), finish_s=drain + tail, drain_s=drain,
                    link_bytes=sol.link_bytes, link_capacity_bytes_s=cap, peak_utilisation=sol.peak_utilisation,
                    segments_s=np.array([0.0, end]), link_rate_bytes_s=None, events=sol.events,
                    tags=tuple(f.tag for f in ph.flows))
    return end, res


def array_loads(topo: Topology, a: FlowArrays) -> sp.csr_matrix:
    """:func:`slowlink.sim.lockstep.group_loads` of flows given as arrays (the same matrix, entry by entry)."""
    keep = a.links >= 0
    lengths = keep.sum(axis=1)
    rows = np.repeat(a.group.astype(np.int64), lengths)
    data = np.repeat(a.size_bytes.astype(np.float64), lengths)
    n_groups = int(a.group.max()) + 1 if len(a) else 0
    m = sp.csr_matrix((data, (rows, a.links[keep])), shape=(n_groups, len(topo.capacity_bytes_s)))
    m.sum_duplicates()
    m.eliminate_zeros()
    return m


def lockstep_drain_s(topo: Topology, a: FlowArrays) -> float:
    """The slowest group's drain (s) of a pipelined phase given as arrays (:func:`lockstep_result`'s first value)."""
    if not len(a):
        return 0.0
    sol = lockstep.solve(np.asarray(topo.capacity_bytes_s, dtype=np.float64), array_loads(topo, a))
    return float(sol.finish_s.max(initial=0.0))


def time_from_drain_s(ph: Phase, drain_s: float) -> float:
    """``steps x (slowest drain x (1 + fill) + per-step latency)`` of one phase, given its drain."""
    return ph.steps * (drain_s * (1.0 + ph.fill_fraction) + ph.step_latency_s)


def phase_time_s(topo: Topology, ph: Phase) -> tuple[float, SimResult | None]:
    """The phase's time (:func:`time_from_drain_s`) and its engine result."""
    drain, res = phase_drain(topo, ph)
    return time_from_drain_s(ph, drain), res


def phase_drain(topo: Topology, ph: Phase) -> tuple[float, SimResult | None]:
    """The phase's slowest drain from its start (s): lockstep if pipelined, else the flow engine."""
    if not ph.flows:
        return 0.0, None
    if ph.pipelined:
        return lockstep_result(topo, ph)
    res = simulate(topo.capacity_bytes_s, topo.latency_s, ph.flows)
    return float(res.drain_s.max() - res.start_s.min()), res
