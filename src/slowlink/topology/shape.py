"""The one sizing rule of the scale-out fabric: where each node's NICs attach and what every uplink stage carries.

Pure (no graph, no domain model above the spec): the analytical link model
(:mod:`slowlink.collectives.links`), the graph builders (:mod:`.fattree`, :mod:`.dragonfly`) and the
emulator (:mod:`slowlink.emulate.plan`) all size the fabric from :func:`fabric_shape` and
:func:`uplink_bytes_s`, so they cannot disagree about which nodes share a leaf or what its uplinks carry.

Fat tree (2 or 3 tiers, ``fabric.oversubscription = [o0, o1, ...]`` from the leaf up):
  * a leaf splits its ``radix`` ports o0:1 between hosts and uplinks: ``d0 = floor(radix * o0 / (1 + o0))``
    ports face down (non-blocking: radix/2);
  * fat tree: a node's NICs share one leaf and never straddle two: ``d0 // nics`` nodes per leaf;
    rail-optimized: NIC ``i`` of each of ``d0`` consecutive nodes goes to that block's rail-``i`` leaf;
  * a leaf's uplinks carry exactly its used down ports x line rate / o0, over ``round(ports / o0)``
    cables (the spec's ratio is kept exact, whatever the rounding of ports);
  * 3 tiers: ``P`` leaves form a pod (``pod_gpus`` when given, else the aggregation switch's down ports
    ``floor(radix * o_pod / (1 + o_pod))``); the pod's uplinks carry its leaves' uplink capacity / o_pod,
    with ``o_pod = max(o1, o2)``: a 3-tier Clos has two uplink stages (leaf -> aggregation, aggregation ->
    core), so the ratios above the leaf collapse into the pod boundary (Llama 3's [1, 1, 7], Dubey et al.
    2024 sec. 3.3.1: 1:7 between pods of 3,072 GPUs).
Dragonfly (Kim et al., ISCA 2008, balanced ``a = 2p = 2h``): ``p = radix // 4`` endpoints per switch,
endpoints spread evenly over the groups, ``a = ceil(per group / p)`` switches per group, and
``m = max(1, a * h // (groups - 1))`` global links between every pair of groups, each at line rate.

Each shape lists its *stages*: the uplink boundaries that traffic pays for when it leaves a domain (a leaf,
a pod, a dragonfly group). Rank placement (which physical node runs each block of ranks) lives here too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from slowlink.errors import FabricMisfit
from slowlink.spec.cluster import Cluster

Index = TypeVar("Index", int, npt.NDArray[np.int64])


@dataclass(frozen=True)
class Stage:
    """An uplink boundary: traffic between nodes of different domains crosses it.

    ``uplink_bytes_s`` is one domain's uplink capacity per direction (a whole rail block for rail-optimized
    leaves: all its rails together); ``pair_bytes_s`` (dragonfly) caps what one pair of domains exchanges
    over its direct global links under minimal routing.
    """

    name: str
    ratio: float
    nodes_per_domain: int
    uplink_bytes_s: float
    pair_bytes_s: float | None = None
    label: str = ""

    @property
    def what(self) -> str:
        """The stage in words, for bottleneck sentences."""
        return self.label or f"{self.name} uplinks"


@dataclass(frozen=True)
class FabricShape:
    """Switch counts and capacities of the compute fabric (see the module docstring for the rule)."""

    kind: str
    nics_per_node: int
    line_bytes_s: float
    endpoints_per_leaf: int      # NIC ports used below one leaf (fat tree, rail) or one switch (dragonfly)
    nodes_per_leaf: int          # nodes whose NICs (one rail of each, rail-optimized) sit below one leaf
    uplinks_per_leaf: int        # parallel uplink cables of a leaf (spines, or aggregation switches per pod)
    leaf_uplink_bytes_s: float   # one leaf uplink cable
    leaves_per_pod: int = 0      # 3 tiers; 0 otherwise
    cores_per_group: int = 0     # 3 tiers: cores behind each aggregation index
    pod_uplink_bytes_s: float = 0.0  # one aggregation -> core cable
    groups: int = 0              # dragonfly groups
    switches_per_group: int = 0  # dragonfly
    global_links_per_pair: int = 0  # dragonfly
    endpoints_per_group: int = 0    # dragonfly: NICs spread evenly over the groups
    global_links_per_switch: int = 0  # dragonfly h
    stages: tuple[Stage, ...] = ()

    def leaf_of_node(self, node: int) -> int:
        """Leaf block of a node (rail-optimized: the block of rail leaves its NICs use)."""
        return node // max(1, self.nodes_per_leaf)

    def df_switch(self, endpoint: int) -> tuple[int, int]:
        """Dragonfly (group, switch in group) of a NIC endpoint (index node * nics + i)."""
        g, r = divmod(endpoint, self.endpoints_per_group)
        return g, r // self.endpoints_per_leaf

    def df_gateway(self, i: Index, j: Index, k: int) -> Index:
        """Switch of group ``i`` where global link ``k`` of the pair (i, j) ends: the pairs' links are dealt
        round the group's switches, h per switch (``((j - i - 1) mod G + k (G - 1)) // h mod a``). ``i`` and
        ``j`` are group numbers or integer arrays of them (element-wise)."""
        g, a, h = self.groups, self.switches_per_group, max(1, self.global_links_per_switch)
        return (((j - i - 1) % g + k * (g - 1)) // h) % a


def down_ports(radix: int, ratio: float) -> int:
    """Ports of a ``radix``-port switch that face down at ``ratio``:1 (down / up = ratio)."""
    return max(1, int(radix * ratio / (1 + ratio)))


def uplink_bytes_s(below: int, each_bytes_s: float, ratio: float) -> float:
    """What a domain's uplinks carry at ``ratio``:1: exactly what its ``below`` used down ports (or member
    domains) bring up, each at ``each_bytes_s``, divided by the ratio (kept exact, whatever the rounding of
    cables)."""
    return below * each_bytes_s / ratio


def _fat_tree(cluster: Cluster) -> FabricShape:
    f = cluster.fabric
    nics = max(1, cluster.compute_nics.per_node)
    line = cluster.compute_nics.speed_bytes_s
    o = f.oversubscription
    d0 = down_ports(f.switch_radix, o[0])
    rails = f.topology == "rail-optimized"
    per_leaf = d0 if rails else max(1, d0 // nics)
    ports = per_leaf if rails else per_leaf * nics
    ups = max(1, round(ports / o[0]))
    leaf_total = uplink_bytes_s(ports, line, o[0])
    if f.topology == "single-switch" or f.tiers <= 1:
        return FabricShape(f.topology, nics, line, cluster.nodes * nics, cluster.nodes, 0, 0.0)
    block_up = uplink_bytes_s(per_leaf * nics, line, o[0])  # a rail block: nics leaves side by side
    stages = [Stage("leaf", o[0], per_leaf, block_up)]
    if f.tiers < 3:
        _check_two_tiers(cluster, per_leaf, nics if rails else 1)
        return FabricShape(f.topology, nics, line, ports, per_leaf, ups, leaf_total / ups, stages=tuple(stages))
    o_pod = max(o[1:]) if len(o) > 1 else 1.0
    if f.pod_gpus is not None:
        blocks = max(1, round(f.pod_gpus / (per_leaf * cluster.gpus_per_node)))
    else:
        blocks = max(1, down_ports(f.switch_radix, o_pod) // (nics if rails else 1))
    pod_leaves = blocks * (nics if rails else 1)
    cores = max(1, round(pod_leaves / o_pod))
    pod_total = uplink_bytes_s(pod_leaves, leaf_total, o_pod)
    stages.append(Stage("pod", o_pod, blocks * per_leaf, pod_total))
    return FabricShape(f.topology, nics, line, ports, per_leaf, ups, leaf_total / ups, pod_leaves, cores,
                       pod_total / (ups * cores), stages=tuple(stages))


def _check_two_tiers(cluster: Cluster, per_leaf: int, leaves_per_block: int) -> None:
    """A 2-tier folded Clos (leaf-spine) joins every leaf to every spine with one spine port per leaf, so it
    has at most ``switch_radix`` leaves (k-port switches: k leaves, k^2/2 hosts at 1:1); more need a third tier."""
    radix = cluster.fabric.switch_radix
    leaves = -(-cluster.nodes // per_leaf) * leaves_per_block
    if leaves > radix:
        raise FabricMisfit(f"fabric: tiers (2) with switch_radix ({radix}): {cluster.nodes} nodes need {leaves} "
                        f"leaves ({per_leaf} nodes per leaf{' per rail' if leaves_per_block > 1 else ''}), but a "
                        f"2-tier fat tree joins at most switch_radix leaves (one spine port each); use tiers: 3 "
                        f"or a larger switch_radix")


def _dragonfly(cluster: Cluster) -> FabricShape:
    f = cluster.fabric
    nics = max(1, cluster.compute_nics.per_node)
    line = cluster.compute_nics.speed_bytes_s
    g_n = f.dragonfly_groups or 2
    per_group = -(-cluster.nodes * nics // g_n)
    p = max(1, f.switch_radix // 4)
    a = -(-per_group // p)
    m = max(1, a * f.dragonfly_global_links // max(1, g_n - 1))
    nodes_per_group = max(1, per_group // nics)
    stage = Stage("group", 1.0, nodes_per_group, (g_n - 1) * m * line, m * line, "global links between groups")
    # One switch-to-switch link inside a group: minimal routes take one to the gateway of the pair's global
    # link and one from the far gateway (crossing.py counts them per link).
    local = Stage("local", 1.0, max(1, p // nics), line, None, "local links inside a group")
    return FabricShape("dragonfly", nics, line, p, max(1, p // nics), 0, 0.0, groups=g_n,
                       switches_per_group=a, global_links_per_pair=m, endpoints_per_group=per_group,
                       global_links_per_switch=f.dragonfly_global_links, stages=(stage, local))


def fabric_shape(cluster: Cluster) -> FabricShape:
    """The one sizing of ``cluster``'s compute fabric."""
    if cluster.fabric.topology == "dragonfly":
        return _dragonfly(cluster)
    return _fat_tree(cluster)


def placement_nodes(cluster: Cluster) -> list[int]:
    """Physical node of each rank block ``b`` (ranks ``b*gpn .. b*gpn+gpn-1``): block (identity),
    fragmented (a seeded shuffle: a scheduler that hands out whatever nodes are free) or custom."""
    p = cluster.placement
    if p.mode == "custom" and p.node_order is not None:
        return list(p.node_order)
    if p.mode == "fragmented":
        return [int(x) for x in np.random.default_rng(p.seed).permutation(cluster.nodes)]
    return list(range(cluster.nodes))
