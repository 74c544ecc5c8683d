"""Degraded parts applied to the one topology, so that both models see the same slow NIC, cable, GPU or node.

The flow simulator gets them on its graph (:func:`apply`): a NIC or cable at ``rate`` carries ``rate`` x its
capacity in both directions, a delayed node's NIC links take ``delay`` more latency each way. The analytical
model gets, per communicator and traffic pattern, a :class:`Penalty` (:func:`group_penalty`) computed from
the same rule the flows follow (which NICs a group's traffic leaves and enters by, :mod:`slowlink.topology.nic`):

* ring and tree: a hop leaving a node is split evenly over the NICs affine to the group's GPUs there
  (NCCL's channels over the rails, :mod:`slowlink.sim.flows`); every channel carries the same share and a
  collective ends with its slowest channel, so the network term of the group grows by ``1 / min rate`` over
  the NICs it uses;
* all_to_all: a cross-node pair leaves by the NICs of the destination's GPU index when the source node
  holds a member there (PXN), else by the source GPU's own (:func:`slowlink.topology.nic.peer_nics`), and
  arrives on the same rails; the transfers through a slow NIC finish last: ``1 / min rate``;
* send_recv: the source GPU's affine NICs and the same rails on the destination node.

Delay: a ring's per-step latency is its mean hop latency (a chunk passes every hop in turn, so the chain is
the sum of the hops, :mod:`slowlink.sim.flows`); one node delayed by ``d`` each way adds ``2 d`` to one
round of ``D`` network hops, i.e. ``2 d / D`` per network hop. An all_to_all or send_recv step waits for its
slowest transfer: ``+ d``. A slow GPU paces every synchronisation it takes part in (its TP group each layer,
its pipeline stage each micro-batch, every rank at the gradient reduction): the step model computes with
the slowest GPU (:func:`paced_gpu`). A fabric cable at a fraction of its rate is priced by the flow
simulator only (its share of a stage depends on the routing of each flow); the analytical model reports it
in ``unpriced``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from slowlink.catalog import Gpu
from slowlink.errors import SpecError, field_error
from slowlink.spec.cluster import Cluster
from slowlink.topology.nic import affine_nics, peer_nics

if TYPE_CHECKING:
    from slowlink.topology.fabric import Topology


@dataclass(frozen=True)
class Penalty:
    """What the degraded parts cost one traffic pattern of a communicator: the network bandwidth term is
    divided by ``factor`` (>= 1), each network hop takes ``extra_hop_lat_s`` more; ``part`` names the slowest
    part it crosses ('' if none)."""

    factor: float = 1.0
    extra_hop_lat_s: float = 0.0
    part: str = ""

    def __bool__(self) -> bool:
        return self.factor > 1.0 or self.extra_hop_lat_s > 0.0


NO_PENALTY = Penalty()


def _nics_used(cluster: Cluster, pattern: str, ranks: np.ndarray, nodes: np.ndarray,
               here: np.ndarray) -> set[tuple[int, int]]:
    """(node, local NIC) pairs one group's network traffic crosses on the nodes of its members ``here`` (those on
    a degraded node), by the flow builders' rule."""
    gpn, nics = cluster.gpus_per_node, max(1, cluster.compute_nics.per_node)
    if pattern == "p2p":
        return {(int(nodes[i]), r) for i in (0, -1) if here[i] for r in affine_nics(nics, gpn, int(ranks[0]) % gpn)}
    if pattern == "a2a":  # each node sends by its members' NICs (PXN) and receives on the senders' rails
        members: dict[int, set[int]] = {}
        for n, g in zip(nodes.tolist(), (ranks % gpn).tolist(), strict=True):
            members.setdefault(n, set()).add(g)
        peers = set().union(*members.values())  # O(nodes x gpn^2): the local GPU index is all that picks the NIC
        kinds = {frozenset(gs) for gs in members.values()}
        rails = {r for gs in kinds for s in gs for d in peers for r in peer_nics(nics, gpn, s, d, gs)}
        return {(n, r) for n in set(nodes[here].tolist()) for r in rails}
    return {(n, r) for n, g in zip(nodes[here].tolist(), (ranks[here] % gpn).tolist(), strict=True)
            for r in affine_nics(nics, gpn, g)}


def _row_penalty(cluster: Cluster, pattern: str, ranks: np.ndarray, nodes: np.ndarray,
                 domains: np.ndarray, here: np.ndarray) -> Penalty:
    d = cluster.degraded
    n_dom = int(np.unique(domains).size)
    if n_dom < 2 and not (pattern == "p2p" and nodes[0] != nodes[-1]):
        return NO_PENALTY  # nothing crosses the network
    rate, part = 1.0, ""
    if d.nic_rate:
        for key in sorted(_nics_used(cluster, pattern, ranks, nodes, here)):
            r = d.nic_rate.get(key)
            if r is not None and r < rate:
                rate, part = r, f"node {key[0]} NIC {key[1]} at {r:.0%}"
    extra = 0.0
    delayed = [(d.node_delay_s[n], n) for n in set(nodes[here].tolist()) if n in d.node_delay_s]
    if delayed:
        delay, node = max(delayed)
        extra = delay if pattern in ("a2a", "p2p") else 2 * delay / max(1, n_dom)
        part = part or f"node {node} +{delay * 1e3:g} ms"
    return Penalty(1.0 / rate, extra, part)


def group_penalty(cluster: Cluster, pattern: str, ranks: np.ndarray, nodes: np.ndarray,
                  domains: np.ndarray) -> Penalty:
    """The worst :class:`Penalty` over concurrent groups, given as (groups, n) arrays of ranks, physical
    nodes and scale-up domains (:func:`slowlink.collectives.communicator.place`): the collective of every
    group ends when the slowest one does. Only the groups with a member on a degraded node are read, and of
    those only their members there, beyond counting their domains (O(total ranks) in numpy); nothing when no
    NIC or node is degraded."""
    d = cluster.degraded
    if not d.nic_rate and not d.node_delay_s:
        return NO_PENALTY
    worst = NO_PENALTY
    bad = np.asarray(sorted({n for n, _ in d.nic_rate} | set(d.node_delay_s)), dtype=np.int64)
    on_bad = np.isin(nodes, bad)  # each member: on a degraded node
    for i in np.flatnonzero(on_bad.any(axis=1)).tolist():
        p = _row_penalty(cluster, pattern, ranks[i], nodes[i], domains[i], on_bad[i])
        if (p.factor, p.extra_hop_lat_s) > (worst.factor, worst.extra_hop_lat_s):
            worst = p
    return worst


def paced_gpu(cluster: Cluster) -> tuple[Gpu, str]:
    """The GPU every synchronised rank waits for: the catalog GPU with its FLOP/s x the lowest ``clock`` of
    the degraded GPUs (HBM bandwidth unchanged: a clock throttle slows the SMs), and that part in words."""
    clocks = cluster.degraded.gpu_clock
    if not clocks:
        return cluster.gpu, ""
    (node, g), clock = min(clocks.items(), key=lambda kv: (kv[1], kv[0]))
    gpu = replace(cluster.gpu, peak_flops={k: v * clock for k, v in cluster.gpu.peak_flops.items()})
    return gpu, f"node {node} GPU {g} at {clock:.0%} clock"


def apply(topo: Topology, cluster: Cluster) -> None:
    """Scale the capacity of every degraded NIC and cable of ``topo`` (both directions) and add each delayed
    node's delay to its NIC links; a link name the graph does not have is a :class:`SpecError`."""
    d = cluster.degraded
    nics = topo.nics_per_node
    for (node, i), rate in d.nic_rate.items():
        e = node * nics + i
        if e < len(topo.nic_up):
            for link in (topo.nic_up[e], topo.nic_down[e]):
                topo.capacity_bytes_s[link] *= rate
    for name, rate in d.link_rate.items():
        u, _, v = name.partition("->")
        ids = [topo.link_id[k] for k in ((u, v), (v, u)) if k in topo.link_id]
        if not ids:
            example = next((n for n in topo.names if n.startswith("leaf:")), "leaf:0->spine:0")
            rule = f"is not a link of the fabric (e.g. {example})"
            raise SpecError(f"cluster: {field_error('degraded.link', name, rule)}")
        for link in ids:
            topo.capacity_bytes_s[link] *= rate
    for node, delay in d.node_delay_s.items():
        for e in range(node * nics, min((node + 1) * nics, len(topo.nic_up))):
            for link in (topo.nic_up[e], topo.nic_down[e]):
                topo.latency_s[link] += delay
