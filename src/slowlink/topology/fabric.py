"""Explicit topology graphs: single switch, 2-tier fat tree and rail-optimized fabrics, with routing.

Graph (``networkx.DiGraph``): vertices ``gpu:<g>``, ``nvsw:<d>`` (one scale-up switch per domain),
``nic:<node>:<i>``, ``leaf:<k>``, ``spine:<s>``, ``stor:<t>`` and ``storsw`` (a separate storage
switch). Vertex attribute ``kind``. Every edge is one direction of a link with ``capacity_bytes_s``,
``latency_s`` and ``link`` (its id in the engine's arrays).

Capacities: a NIC link (``nic->leaf`` and ``leaf->nic``) carries line rate x the transport's efficiency
(what NCCL gets from it); switch-to-switch links carry line rate, divided per tier by the
oversubscription ratio (downlink:uplink) from ``cluster.fabric.oversubscription``. Latency: each
switch hop costs ``fabric.switch_latency_s``; the transport's fixed latency is charged once, on the NIC
uplink. Shortcuts: PCIe between a GPU and its NIC is not modelled; 3-tier fat trees and dragonfly are not
built yet (a SpecError says so).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from slowlink.errors import SpecError
from slowlink.spec.cluster import Cluster


@dataclass
class Topology:
    """Links as arrays for the engine, the graph for humans, and routing between GPUs."""

    graph: nx.DiGraph
    capacity_bytes_s: list[float] = field(default_factory=list)
    latency_s: list[float] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    link_id: dict[tuple[str, str], int] = field(default_factory=dict)
    nic_leaf: dict[str, str] = field(default_factory=dict)
    spines: list[str] = field(default_factory=list)
    gpus_per_node: int = 1
    nics_per_node: int = 1
    domain_gpus: int = 1
    adaptive: bool = False
    ecmp_seed: int = 0
    storage_targets: int = 0
    storage_shared: bool = False

    def add_link(self, u: str, v: str, cap: float, lat: float) -> None:
        """Add both directions of a link ``u <-> v``."""
        for a, b in ((u, v), (v, u)):
            self.link_id[(a, b)] = len(self.capacity_bytes_s)
            self.capacity_bytes_s.append(cap)
            self.latency_s.append(lat)
            self.names.append(f"{a}->{b}")
            self.graph.add_edge(a, b, capacity_bytes_s=cap, latency_s=lat, link=self.link_id[(a, b)])

    def nic_of(self, gpu: int, channel: int = 0) -> str:
        """The NIC a GPU's traffic on ``channel`` leaves by: channel ``c`` rides rail ``c % nics`` (NCCL rings
        cross node boundaries on one rail each; PXN-style forwarding over NVLink is assumed free)."""
        node = gpu // self.gpus_per_node
        return f"nic:{node}:{channel % self.nics_per_node}"

    def _ecmp(self, key: tuple[object, ...]) -> int:
        """Deterministic per-flow hash (seeded; crc32, so stable across processes), like a 5-tuple hash."""
        rng = np.random.default_rng([self.ecmp_seed, zlib.crc32(repr(key).encode())])
        return int(rng.integers(len(self.spines)))

    def nic_paths(self, a: str, b: str, key: tuple[object, ...]) -> list[tuple[float, tuple[int, ...]]]:
        """(weight, path) pairs from NIC ``a`` to NIC ``b``: one ECMP path, or every spine when adaptive."""
        la, lb = self.nic_leaf[a], self.nic_leaf[b]
        up, down = self.link_id[(a, la)], self.link_id[(lb, b)]
        if la == lb:
            return [(1.0, (up, down))]
        spines = self.spines if self.adaptive else [self.spines[self._ecmp(key)]]
        w = 1.0 / len(spines)
        return [(w, (up, self.link_id[(la, s)], self.link_id[(s, lb)], down)) for s in spines]

    def gpu_paths(self, src: int, dst: int, channel: int = 0,
                  key: tuple[object, ...] = ()) -> list[tuple[float, tuple[int, ...]]]:
        """Paths GPU ``src`` -> GPU ``dst``: over the scale-up switch inside a domain, else the NICs."""
        if src // self.domain_gpus == dst // self.domain_gpus:
            d = f"nvsw:{src // self.domain_gpus}"
            return [(1.0, (self.link_id[(f"gpu:{src}", d)], self.link_id[(d, f"gpu:{dst}")]))]
        return self.nic_paths(self.nic_of(src, channel), self.nic_of(dst, channel), (src, dst, channel, *key))


def _scale_up(topo: Topology, cluster: Cluster) -> None:
    for g in range(cluster.gpus):
        topo.add_link(f"gpu:{g}", f"nvsw:{g // topo.domain_gpus}", cluster.scale_up.bw_bytes_s,
                      cluster.scale_up.link.latency_s / 2)


def build(cluster: Cluster, nics_per_leaf: int | None = None, spines: int | None = None) -> Topology:
    """The compute fabric of ``cluster`` as a :class:`Topology`.

    ``nics_per_leaf`` (default: the radix's down ports, ``radix * o / (1 + o)``) and ``spines``
    (default: the leaf's up ports) override the sizing, e.g. to spread a small cluster over leaves.
    """
    f = cluster.fabric
    if f.topology == "dragonfly" or f.tiers == 3:
        raise SpecError(f"fabric.topology ({f.topology!r}, tiers {f.tiers}) is not built by the flow "
                        "simulator yet: use fat-tree/rail-optimized with tiers 1-2, or single-switch")
    nics = max(1, cluster.compute_nics.per_node)
    topo = Topology(graph=nx.DiGraph(), gpus_per_node=cluster.gpus_per_node, nics_per_node=nics,
                    domain_gpus=min(cluster.scale_up.domain_gpus, cluster.gpus),
                    adaptive=f.routing == "adaptive", ecmp_seed=f.ecmp_seed)
    _scale_up(topo, cluster)
    line = cluster.compute_nics.speed_bytes_s
    nic_cap = line * f.transport.efficiency
    o = f.oversubscription[0]
    total = cluster.nodes * nics
    single = f.topology == "single-switch" or f.tiers == 1
    down = total if single else (nics_per_leaf or max(1, int(f.switch_radix * o / (1 + o))))
    order = _placement_nodes(cluster)
    for pos, node in enumerate(order):
        for i in range(nics):
            if f.topology == "rail-optimized" and not single:
                k = i * max(1, -(-cluster.nodes // max(1, down))) + pos // max(1, down)
            else:
                k = (pos * nics + i) // down
            nic, leaf = f"nic:{node}:{i}", f"leaf:{k}"
            topo.nic_leaf[nic] = leaf
            topo.add_link(nic, leaf, nic_cap, f.transport.latency_s / 2 + f.switch_latency_s)
    leaves = sorted({v for v in topo.nic_leaf.values()})
    n_leaves = len(leaves)
    if n_leaves > 1:
        n_sp = spines or max(1, round(down / o))
        topo.spines = [f"spine:{s}" for s in range(n_sp)]
        per_link = down * line / o / n_sp
        for leaf in leaves:
            for s in topo.spines:
                topo.add_link(leaf, s, per_link, f.switch_latency_s)
    return topo


def _placement_nodes(cluster: Cluster) -> list[int]:
    """Physical node order: rank block ``p`` lives on node ``order[p]`` (block, fragmented, custom)."""
    p = cluster.placement
    if p.mode == "custom" and p.node_order is not None:
        return list(p.node_order)
    if p.mode == "fragmented":
        return [int(x) for x in np.random.default_rng(p.seed).permutation(cluster.nodes)]
    return list(range(cluster.nodes))
