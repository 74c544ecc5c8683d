"""Collectives expanded into flows on a :class:`~slowlink.topology.fabric.Topology`, then simulated.

* ring (all_reduce, all_gather, reduce_scatter): ``C = nics_per_node`` channels, channel ``c`` crossing
  node boundaries on rail ``c`` (NCCL spreads its rings over the NICs). Symmetry shortcut: every step of a
  ring moves the same bytes over the same links, so one step is simulated and multiplied by the step
  count (``2(n-1)`` for all_reduce, ``n-1`` otherwise). This holds when nothing else shares the links
  during the collective; with background traffic use :func:`ring_step_flows` in a scenario instead.
* all_to_all: one flow per (source GPU, destination GPU), ``size/n`` bytes each (nccl-tests' per-rank
  total ``size``), all at once.
* send_recv: one flow GPU 0 -> GPU n-1.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from slowlink.collectives.model import Prediction
from slowlink.sim.engine import Flow, SimResult, simulate
from slowlink.spec.cluster import Cluster
from slowlink.topology.fabric import Topology, build

_BUS: dict[str, Callable[[int], float]] = {
        "all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
        "reduce_scatter": lambda n: (n - 1) / n, "all_to_all": lambda n: (n - 1) / n,
        "send_recv": lambda n: 1.0}


def _add(flows: list[Flow], paths: list[tuple[float, tuple[int, ...]]], size: float, tag: str,
         start: float = 0.0) -> None:
    for w, p in paths:
        flows.append(Flow(p, size * w, start, tag))


def ring_step_flows(topo: Topology, ranks: list[int], chunk_bytes: float, tag: str = "ring",
                    start: float = 0.0) -> list[Flow]:
    """One ring step: every rank sends ``chunk_bytes`` to the next, split over the rail channels."""
    flows: list[Flow] = []
    c = topo.nics_per_node
    for i, src in enumerate(ranks):
        dst = ranks[(i + 1) % len(ranks)]
        for ch in range(c):
            _add(flows, topo.gpu_paths(src, dst, ch, (tag,)), chunk_bytes / c, tag, start)
    return flows


def all_to_all_flows(topo: Topology, ranks: list[int], size_bytes: float, tag: str = "a2a",
                     start: float = 0.0) -> list[Flow]:
    """Every rank sends ``size_bytes / n`` to every other rank."""
    n = len(ranks)
    flows: list[Flow] = []
    for src in ranks:
        for dst in ranks:
            if src != dst:
                _add(flows, topo.gpu_paths(src, dst, dst % topo.nics_per_node, (tag,)), size_bytes / n, tag,
                     start)
    return flows


def simulate_collective(cluster: Cluster, op: str, size_bytes: float, ranks: list[int] | None = None,
                        topo: Topology | None = None) -> tuple[Prediction, SimResult]:
    """Simulate ``op`` of ``size_bytes`` (nccl-tests convention) over ``ranks`` (default: every GPU)."""
    topo = topo or build(cluster)
    rk = ranks if ranks is not None else list(range(cluster.gpus))
    n = len(rk)
    if op in ("all_reduce", "all_gather", "reduce_scatter"):
        steps = 2 * (n - 1) if op == "all_reduce" else n - 1
        res = simulate(topo.capacity_bytes_s, topo.latency_s, ring_step_flows(topo, rk, size_bytes / n))
        time_s, algo = res.makespan_s * steps, "ring"
    elif op == "all_to_all":
        res = simulate(topo.capacity_bytes_s, topo.latency_s, all_to_all_flows(topo, rk, size_bytes))
        time_s, algo = res.makespan_s, "all_to_all"
    elif op == "send_recv":
        flows: list[Flow] = []
        _add(flows, topo.gpu_paths(rk[0], rk[-1]), size_bytes, "p2p")
        res = simulate(topo.capacity_bytes_s, topo.latency_s, flows)
        time_s, algo = res.makespan_s, "p2p"
    else:
        raise ValueError(f"op ({op!r}) is not simulated: use all_reduce, all_gather, reduce_scatter, "
                         "all_to_all or send_recv")
    hot = int(np.argmax(res.peak_utilisation))
    algbw = size_bytes / time_s if time_s > 0 else float("inf")
    pred = Prediction(op, size_bytes, n, time_s, algbw, algbw * _BUS[op](n), algo, "Simple",
                          topo.names[hot], f"flow sim: hottest link {topo.names[hot]} at "
                          f"{res.peak_utilisation[hot]:.0%} of capacity")
    return pred, res
