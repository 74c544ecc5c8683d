"""A collective on the topology graph: the analytical model's algorithm choice, expanded into flows and run.

``simulate_collective`` asks :func:`slowlink.collectives.predict` which algorithm NCCL would pick for this
communicator, builds that algorithm's phases (:mod:`slowlink.sim.flows`) and runs each through the engine.
Time = sum over phases of ``steps x (slowest drain + per-step latency)``; a pipelined phase (ring, tree,
NVLS) drains in lockstep (:mod:`slowlink.sim.lockstep`: the hottest link of each group sets its pace), a
phase of independent transfers (all_to_all, send_recv) through the max-min flow engine. The one-step
symmetry shortcut (a ring's steps are identical) holds when nothing else shares the links during the
collective; with background traffic use a scenario (:mod:`slowlink.sim.scenario`), which chains the steps.
"""

from __future__ import annotations

import numpy as np

from slowlink.collectives.communicator import communicator as shared_communicator
from slowlink.collectives.model import Group, Prediction, predict
from slowlink.collectives.ops import busbw_factor, check_algorithm_applies
from slowlink.sim.engine import SimResult
from slowlink.sim.flows import RING_STEPS, phases
from slowlink.sim.phase import Phase, phase_time_s
from slowlink.spec.cluster import Cluster
from slowlink.topology.build import build
from slowlink.topology.fabric import Topology

SIMULATED = (*RING_STEPS, "all_to_all", "send_recv")


def communicator(cluster: Cluster, topo: Topology, op: str, groups: list[list[int]]) -> Group:
    """The analytical model's description of the concurrent ``groups``: the one rule both models use
    (:func:`slowlink.collectives.communicator.communicator`), on the topology's placement."""
    return shared_communicator(cluster, op, groups, topo.node_of_block)


def choose_algorithm(cluster: Cluster, topo: Topology, op: str, size_bytes: float,
                     groups: list[list[int]]) -> Prediction:
    """The analytical prediction for one of ``groups`` (its ``.algorithm`` is what the flows follow)."""
    if op not in SIMULATED:
        raise ValueError(f"op ({op!r}) is not simulated: use {', '.join(SIMULATED)}")
    return predict(cluster, op, size_bytes, communicator(cluster, topo, op, groups))


def run_phase(topo: Topology, ph: Phase) -> tuple[float, SimResult | None]:
    """``steps x (slowest drain x (1 + fill) + per-step latency)`` of one phase, and its engine result."""
    return phase_time_s(topo, ph)


def simulate_collective(cluster: Cluster, op: str, size_bytes: float, ranks: list[int] | None = None,
                        topo: Topology | None = None, *, algorithm: str | None = None
                        ) -> tuple[Prediction, SimResult]:
    """Simulate ``op`` of ``size_bytes`` (nccl-tests convention) over ``ranks`` (default: every GPU).

    Returns the prediction (same schema as the analytical model; ``reason`` names the hottest link) and
    the engine result of the phase that took longest. ``algorithm`` forces ring / tree / nvls /
    hierarchical instead of the analytical model's pick.
    """
    check_algorithm_applies(op, algorithm)
    topo = topo or build(cluster)
    rk = ranks if ranks is not None else list(range(cluster.gpus))
    n = len(rk)
    groups = [[rk[0], rk[-1]]] if op == "send_recv" else [rk]
    ana = choose_algorithm(cluster, topo, op, size_bytes, groups)
    algo = algorithm or ana.algorithm
    total, worst_t, worst = 0.0, -1.0, None
    for ph in phases(topo, op, algo, groups, size_bytes):
        t, res = run_phase(topo, ph)
        total += t
        if t > worst_t and res is not None:
            worst_t, worst = t, res
    if worst is None:
        raise ValueError(f"{op} of {size_bytes} bytes over {n} ranks moves no bytes over any link")
    hot = int(np.argmax(worst.peak_utilisation))
    algbw = size_bytes / total if total > 0 else float("inf")
    pred = Prediction(op, size_bytes, n, total, algbw, algbw * busbw_factor(op, n), algo, "Simple",
                      topo.names[hot], f"flow sim ({algo}): hottest link {topo.names[hot]} at "
                      f"{worst.peak_utilisation[hot]:.0%} of capacity")
    return pred, worst
