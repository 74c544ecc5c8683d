"""Explicit topology graphs built from the cluster spec, with rank placement and routing between GPUs.

:func:`slowlink.topology.build.build` returns a :class:`Topology`: links as arrays for the engine (one
entry per direction of every cable, capacity in bytes/s and latency in s), a name per link, and routing from
any rank to any rank. The graph itself (``networkx.DiGraph``, vertex attribute ``kind``, edge attributes
``capacity_bytes_s``, ``latency_s``, ``link``) is built on demand from the link names.

Vertices: ``gpu:<g>`` (physical GPU), ``nvsw:<d>`` (one scale-up switch per domain, which may span nodes,
e.g. NVL72), ``nic:<node>:<i>`` (physical node), then the scale-out switches of the fabric module
(:mod:`slowlink.topology.fattree` or :mod:`slowlink.topology.dragonfly`) and the storage vertices
(:mod:`slowlink.topology.storage`).

Capacities: a GPU's scale-up link carries its per-GPU rate x ``SCALE_UP_EFFICIENCY`` (what NCCL gets, the
analytical model's constant); a NIC link carries line rate x the transport's efficiency; switch links
carry line rate, divided per tier by the oversubscription ratio. Latency: each switch hop costs
``fabric.switch_latency_s``; the transport's fixed latency is charged once per network crossing (half on
the NIC uplink, half on the downlink); a scale-up hop costs the link's latency.

Shortcuts: PCIe between a GPU and its NIC is not modelled; the scale-up switch is non-blocking; a ring
channel leaving a node uses the NICs affine to the communicator's GPUs on that node (NCCL's PXN moves data
over NVLink to the right rail for free).
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from slowlink.errors import SpecError
from slowlink.topology.nic import affine_nics, peer_nics  # the one rule, shared with the analytical model

if TYPE_CHECKING:
    import networkx as nx

Path = tuple[int, ...]
Paths = list[tuple[float, Path]]
_MASK = (1 << 64) - 1


def mix(*values: int) -> int:
    """A seeded, process-stable 64-bit hash of integers (splitmix64 steps), like a switch's 5-tuple hash."""
    h = 0x9E3779B97F4A7C15
    for v in values:
        h = (h ^ (v & _MASK)) * 0xBF58476D1CE4E5B9 & _MASK
        h = (h ^ (h >> 31)) * 0x94D049BB133111EB & _MASK
        h ^= h >> 29
    return h


_C0, _C1, _C2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def mix_array(*values: np.ndarray | int) -> np.ndarray:
    """:func:`mix` of arrays of non-negative integers, element by element (uint64 wraps as ``& _MASK`` does)."""
    h: np.ndarray = np.full(np.broadcast(*[np.asarray(v) for v in values]).shape, _C0, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for v in values:
            h = (h ^ np.asarray(v).astype(np.uint64)) * _C1
            h = (h ^ (h >> np.uint64(31))) * _C2
            h ^= h >> np.uint64(29)
    return h


def tag_id(tag: str) -> int:
    """A stable integer for a traffic tag (part of the ECMP key)."""
    return zlib.crc32(tag.encode())


@dataclass
class Topology:
    """Links as arrays for the engine, names for humans, and routing between ranks.

    Ranks map to GPUs by the placement: rank block ``b`` (ranks ``b*gpn .. b*gpn+gpn-1``) lives on
    physical node ``node_of_block[b]``. ``route(src_nic, dst_nic, h)`` (NIC indices ``node * nics + i``,
    storage endpoints after them) returns weighted paths; ``h`` is the flow's ECMP hash.
    """

    gpus_per_node: int
    nics_per_node: int
    domain_gpus: int
    node_of_block: list[int]
    kind: str = "single-switch"
    arch: str = "hopper"          # the GPU generation (catalog), for generation-specific NVLS rates
    adaptive: bool = False
    ecmp_seed: int = 0
    capacity_bytes_s: list[float] = field(default_factory=list)
    latency_s: list[float] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    link_id: dict[tuple[str, str], int] = field(default_factory=dict)
    nic_up: list[int] = field(default_factory=list)
    nic_down: list[int] = field(default_factory=list)
    gpu_up: list[int] = field(default_factory=list)
    gpu_down: list[int] = field(default_factory=list)
    route: Callable[[int, int, int], Paths] | None = None
    route_array: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None = None
    # route of many (NIC a, NIC b, hash) at once, one path each: (flows, hops) link ids padded with -1 (a fabric
    # whose routes may split a flow over several paths leaves it None; callers then route flow by flow)
    storage_targets: int = 0
    storage_shared: bool = False
    storage_endpoint0: int = 0

    def add_link(self, u: str, v: str, cap: float, lat: float) -> tuple[int, int]:
        """Add both directions of a link ``u <-> v``; returns (id of u->v, id of v->u)."""
        ids = []
        for a, b in ((u, v), (v, u)):
            self.link_id[(a, b)] = len(self.capacity_bytes_s)
            ids.append(len(self.capacity_bytes_s))
            self.capacity_bytes_s.append(cap)
            self.latency_s.append(lat)
            self.names.append(f"{a}->{b}")
        return ids[0], ids[1]

    def add_links(self, us: list[str], vs: list[str], caps: list[float], lats: list[float]) -> list[tuple[int, int]]:
        """:meth:`add_link` of many links at once (the same ids, names and order; one call instead of one per
        link, for the hundreds of thousands of GPU and NIC links of a large cluster)."""
        base = len(self.capacity_bytes_s)
        ids = [(base + 2 * i, base + 2 * i + 1) for i in range(len(us))]
        self.capacity_bytes_s.extend(x for c in caps for x in (c, c))
        self.latency_s.extend(x for t in lats for x in (t, t))
        self.names.extend(x for u, v in zip(us, vs, strict=True) for x in (f"{u}->{v}", f"{v}->{u}"))
        self.link_id.update(kv for (u, v), (a, b) in zip(zip(us, vs, strict=True), ids, strict=True)
                            for kv in (((u, v), a), ((v, u), b)))
        return ids

    @property
    def graph(self) -> nx.DiGraph:
        """The links as a directed graph (built on each call; for inspection, not for the engine)."""
        import networkx as nx  # ~60 ms to import; only this view needs it

        g = nx.DiGraph()
        for i, name in enumerate(self.names):
            u, v = name.split("->")
            g.add_edge(u, v, capacity_bytes_s=self.capacity_bytes_s[i], latency_s=self.latency_s[i], link=i)
        for vtx in g.nodes:
            g.nodes[vtx]["kind"] = vtx.split(":")[0]
        return g

    @property
    def gpus(self) -> int:
        return len(self.node_of_block) * self.gpus_per_node

    def gpu_of(self, rank: int) -> int:
        """The physical GPU of a rank (placement)."""
        g = self.gpus_per_node
        return self.node_of_block[rank // g] * g + rank % g

    def node_of(self, rank: int) -> int:
        return self.node_of_block[rank // self.gpus_per_node]

    def domain_of(self, rank: int) -> int:
        return self.gpu_of(rank) // self.domain_gpus

    def affine_nics(self, rank: int) -> list[int]:
        """Local indices of the NICs nearest a rank's GPU (PCIe affinity: NICs split evenly over GPUs)."""
        return affine_nics(self.nics_per_node, self.gpus_per_node, rank % self.gpus_per_node)

    def peer_nics(self, src: int, dst: int, node_gpus: set[int]) -> list[int]:
        """Local NICs ``src`` sends to ``dst`` by, given the communicator's local GPUs on src's node (PXN)."""
        g = self.gpus_per_node
        return peer_nics(self.nics_per_node, g, src % g, dst % g, node_gpus)

    def gpu_array(self, ranks: np.ndarray) -> np.ndarray:
        """:meth:`gpu_of` of an array of ranks."""
        g = self.gpus_per_node
        out: np.ndarray = self.block_array[ranks // g] * g + ranks % g
        return out

    @functools.cached_property
    def block_array(self) -> np.ndarray:
        """``node_of_block`` as an array (made once: the placement is set when the topology is built)."""
        return np.asarray(self.node_of_block, dtype=np.int64)

    def nic_index(self, rank: int, local_nic: int) -> int:
        return self.node_of(rank) * self.nics_per_node + local_nic % self.nics_per_node

    def nic_index_array(self, ranks: np.ndarray, local_nic: np.ndarray) -> np.ndarray:
        """:meth:`nic_index` of arrays of ranks and local NICs."""
        out: np.ndarray = self.block_array[ranks // self.gpus_per_node] * self.nics_per_node \
            + local_nic % self.nics_per_node
        return out

    def nic_paths(self, a: int, b: int, h: int) -> Paths:
        """Weighted paths from NIC index ``a`` to NIC index ``b`` under the fabric's routing."""
        if a == b:
            return [(1.0, ())]
        if self.route is None:
            raise SpecError("this topology has no scale-out fabric (nics.compute.per_node is 0)")
        return self.route(a, b, h)

    def gpu_paths(self, src: int, dst: int, local_nic: int | None = None, key: int = 0,
                  dst_nic: int | None = None) -> Paths:
        """Paths rank ``src`` -> rank ``dst``: over the scale-up switch inside a domain, else the NICs.

        ``local_nic`` picks the NIC on the source node (default: the source GPU's first affine NIC);
        ``dst_nic`` the one on the destination node (default: the same local index, a rail).
        """
        gs, gd = self.gpu_of(src), self.gpu_of(dst)
        if gs == gd:
            return [(1.0, ())]
        if gs // self.domain_gpus == gd // self.domain_gpus:
            return [(1.0, (self.gpu_up[gs], self.gpu_down[gd]))]
        ln = self.affine_nics(src)[0] if local_nic is None else local_nic
        a = self.nic_index(src, ln)
        b = self.nic_index(dst, ln if dst_nic is None else dst_nic)
        return self.nic_paths(a, b, mix(self.ecmp_seed, gs, gd, ln, key))

    def gpu_path_array(self, src: np.ndarray, dst: np.ndarray, local_nic: np.ndarray, key: np.ndarray,
                       dst_nic: np.ndarray) -> np.ndarray | None:
        """:meth:`gpu_paths` of many (src, dst, local NIC, key, destination NIC) in different scale-up domains,
        one path each, as (flows, hops) link ids padded with -1; None where the fabric has no array router."""
        if self.route_array is None:
            return None
        gs, gd = self.gpu_array(src), self.gpu_array(dst)
        a, b = self.nic_index_array(src, local_nic), self.nic_index_array(dst, dst_nic)
        out = self.route_array(a, b, mix_array(self.ecmp_seed, gs, gd, local_nic, key))
        out[a == b] = -1  # the same NIC: no link (nic_paths)
        return out
