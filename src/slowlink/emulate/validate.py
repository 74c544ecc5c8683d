"""Predicted against measured on the emulation: the analytical and flow models, scaled like the links.

The models see the cluster the emulation really is (:func:`emulated_cluster`): one rank per node, each
NIC at the emulated rate times TCP's payload fraction (``MSS / frame`` = 1448 / 1514 with timestamps,
since tbf counts whole Ethernet frames), transport efficiency 1, no switch latency, and the added delay
of each impaired link on that link (the analytical model, which has one latency for every path, is given
the largest). Error = (predicted - measured) / measured; measured is the median of the timed iterations
of the slowest rank; ``best_s`` is the fastest timed iteration. all_to_all is timed with every receive
posted before any send, as NCCL runs it (:mod:`slowlink.emulate.collective` says why gloo's own
``all_to_all_single`` is not used): on the 2:1 and 3:1 two-leaf trees both models then read -7% against its
median (docs/emulate.md); what is left is TCP sharing the sender's link and the receiver's port, two
bottlenecks in series, unevenly (plain Python sockets show it on a single switch too), which the fluid
models do not represent: the best iteration and the median are both reported.
``cpu_busy`` is the machine's CPU use during the timed iterations (``/proc/stat``, other users included)
and ``rank_cpu`` the busiest rank's CPU time / wall time. A rank busy half the time or more (or a quarter
on a saturated machine) means the CPUs, not the links, may set the time: the row says ``cpu_limited``.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from slowlink.collectives import predict
from slowlink.emulate import net
from slowlink.emulate.measure import collective_report
from slowlink.emulate.plan import Plan
from slowlink.sim.collectives import simulate_collective
from slowlink.spec.cluster import Cluster, NicGroup
from slowlink.topology.build import build
from slowlink.topology.fabric import Topology

if TYPE_CHECKING:
    from slowlink.progress import OnStep

TCP_PAYLOAD_FRACTION = 1448 / 1514
RANK_CPU_LIMIT = 0.5


@dataclass(frozen=True)
class Row:
    """One predicted-against-measured comparison."""

    case: str
    measured_s: float
    predicted_s: float
    fidelity: str
    error: float
    best_s: float
    best_error: float
    cpu_busy: float
    rank_cpu: float
    cpu_limited: bool


def emulated_cluster(cluster: Cluster, plan: Plan) -> Cluster:
    """``cluster`` as the emulation builds it: one GPU per node, NICs at the emulated goodput."""
    delay = max((x.delay_s for x in plan.links), default=0.0)
    transport = replace(cluster.fabric.transport, efficiency=1.0, latency_s=delay)
    # The plan's link delays (a delayed node's included) are the latency here: not its Penalty on top.
    return replace(cluster, nodes=len(plan.nodes), gpus_per_node=1,
                   degraded=replace(cluster.degraded, node_delay_s={}),
                   scale_up=replace(cluster.scale_up, domain_gpus=1),
                   compute_nics=NicGroup(plan.rails, plan.node_rate_bytes_s * TCP_PAYLOAD_FRACTION),
                   fabric=replace(cluster.fabric, transport=transport, switch_latency_s=0.0, routing="adaptive"))


def emulated_topology(scaled: Cluster, plan: Plan) -> Topology:
    """The flow model's graph of the emulation: same leaves (one sizing rule), each leaf's uplinks as one
    trunk to the spine (the emulation's single uplink per rail), link delays added."""
    topo = build(scaled)
    topo.latency_s = [0.0] * len(topo.latency_s)
    for x in plan.links:
        if not x.delay_s:
            continue
        k = int(x.name[1:].split("r")[0])
        if x.name.startswith("n"):
            u = f"nic:{k}:{x.rail}"
            v = next(b for a, b in topo.link_id if a == u)  # the NIC's one switch port
        else:
            u = f"leaf:{k}"
            v = next(b for a, b in topo.link_id if a == u and b.startswith("spine"))
        for edge in ((u, v), (v, u)):
            topo.latency_s[topo.link_id[edge]] += x.delay_s
    return topo


def measure_case(plan: Plan, op: str, size_bytes: float, iters: int) -> tuple[float, float, float, float]:
    """Median and best time of ``op`` over ``iters`` iterations, the machine's CPU busy fraction and the
    busiest rank's CPU share meanwhile."""
    r = collective_report(plan, op, size_bytes, iters=iters)
    return statistics.median(r["times_s"]), min(r["times_s"]), float(r["cpu_busy"]), max(r["cpu_share"])


def cpu_limited(cpu_busy: float, rank_cpu: float) -> bool:
    """Whether the CPUs may have set the time: a rank busy half the time, or a quarter when the machine
    was saturated (>= 95%)."""
    return rank_cpu >= RANK_CPU_LIMIT or (cpu_busy >= 0.95 and rank_cpu >= RANK_CPU_LIMIT / 2)


def validate(cluster: Cluster, plan: Plan, ops: list[str], size_bytes: float, iters: int = 3,
             on_step: OnStep | None = None) -> list[Row]:
    """Bring ``plan`` up, measure each op, predict it with both models, tear down (also on failure).
    ``on_step`` is told as each phase begins: ``bring-up``, each op, ``tear-down``."""
    step = on_step or (lambda what: None)
    scaled = emulated_cluster(cluster, plan)
    topo = emulated_topology(scaled, plan)
    rows: list[Row] = []
    step(f"bring-up ({len(plan.namespaces)} namespaces)")
    net.up_owned(plan)
    try:
        for op in ops:
            step(f"{op} x {iters} iterations")
            measured, best, busy, rank_cpu = measure_case(plan, op, size_bytes, iters)
            flow, _ = simulate_collective(scaled, op, size_bytes, topo=topo)
            analytical = predict(scaled, op, size_bytes)
            case = f"{plan.topology} {op} {size_bytes / 2**20:g}MiB" + (
                " +delay" if any(x.delay_s for x in plan.links) else "")
            for fidelity, pred in (("flow", flow.time_s), ("analytical", analytical.time_s)):
                rows.append(Row(case, measured, pred, fidelity, (pred - measured) / measured, best,
                                (pred - best) / best, busy, rank_cpu,
                                cpu_limited(busy, rank_cpu)))
    finally:
        step("tear-down")
        net.down(plan.run_id)
    return rows
