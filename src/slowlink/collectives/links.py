"""The links a communicator's traffic crosses, and the bandwidth each gives it (bytes/s, SI).

Inside the scale-up domain: the link's per-GPU rate x :data:`SCALE_UP_EFFICIENCY`. Across domains: the
domain's compute NICs x speed x ``transport.efficiency``, shared by ``groups_per_node`` communicators,
divided by the worst oversubscription ratio of the fabric tiers the group spans, and reduced by the
transport's ``tail_penalty`` (untuned RoCE).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from slowlink import units
from slowlink.collectives.constants import NET_REFERENCE_LAT_US, SCALE_UP_EFFICIENCY
from slowlink.spec.cluster import Cluster


@dataclass(frozen=True)
class Links:
    """What one communicator sees of the cluster."""

    ranks: int
    ranks_per_domain: int       # ranks of this communicator inside one scale-up domain
    domains: int                # scale-up domains the communicator spans (NCCL's "nodes")
    nodes: int                  # physical nodes spanned
    intra_bw_bytes_s: float     # NCCL-achievable scale-up bandwidth per rank
    net_bw_bytes_s: float       # network bandwidth of one domain for this communicator, after sharing
    net_lat_scale: float        # transport latency / NCCL's 14 us reference
    intra_hw: str               # 'nvlink' or 'pci' (NCCL's latency row)
    scale_up_name: str
    net_name: str
    crossed_ratio: float        # worst oversubscription ratio crossed (1 = none)
    crossed_tier: int | None    # index (0 = leaf) of the tier that sets crossed_ratio
    tail_penalty: float


def nodes_per_leaf(cluster: Cluster) -> int:
    """Nodes under one leaf switch.

    Half a switch's ports face down. Rail-optimized: each NIC of a node goes to a different leaf, so a
    leaf serves radix/2 nodes. Fat tree: a node's NICs share a leaf: (radix/2) / NICs per node.
    """
    down = max(1, cluster.fabric.switch_radix // 2)
    if cluster.fabric.topology == "rail-optimized":
        return down
    return max(1, down // max(1, cluster.compute_nics.per_node))


def tier_capacities_nodes(cluster: Cluster) -> list[float]:
    """Nodes under one switch of each tier (index 0 = leaf), the rule that decides what a group crosses.

    Tier i below the top holds nodes_per_leaf x (radix/2)^i nodes; the top tier's domain is the pod
    (``pod_gpus`` / gpus_per_node) when given, else nodes_per_leaf x (radix/2)^(tiers-1). A group spanning
    more nodes than tier i's domain crosses tier i's uplinks and is charged its ratio.
    """
    f = cluster.fabric
    if f.topology == "single-switch" or f.tiers <= 1:
        return [math.inf]
    half = max(1, f.switch_radix // 2)
    caps = [float(nodes_per_leaf(cluster) * half**i) for i in range(f.tiers)]
    if f.pod_gpus is not None:
        caps[-1] = f.pod_gpus / cluster.gpus_per_node
    return caps


def crossed(cluster: Cluster, span_nodes: int) -> tuple[float, int | None]:
    """(worst ratio, its tier index) over the tiers a group of ``span_nodes`` nodes crosses.

    Every rank sends at once (a busy cluster), so traffic through a tier of ratio r gets 1/r of its NIC
    rate; the worst tier crossed bounds it (Llama 3's 1:7 pod boundary, arXiv 2407.21783 sec. 3.3).
    """
    ratios = cluster.fabric.oversubscription
    best: tuple[float, int | None] = (1.0, None)
    for i, cap in enumerate(tier_capacities_nodes(cluster)):
        if span_nodes > cap and i < len(ratios) and ratios[i] > best[0]:
            best = (ratios[i], i)
    return best


def scale_up_bw(cluster: Cluster) -> float:
    """Per-rank NCCL-achievable scale-up bandwidth: line rate x SCALE_UP_EFFICIENCY (see constants)."""
    return cluster.scale_up.bw_bytes_s * SCALE_UP_EFFICIENCY


def network_bw(cluster: Cluster, nodes_per_domain: int, groups_per_node: int, ratio: float) -> float:
    """A domain's NIC bandwidth for one communicator.

    nics x speed x transport.efficiency x nodes in the domain / groups_per_node / ratio x (1 - tail).
    """
    t = cluster.fabric.transport
    nic = cluster.compute_nics.per_node * cluster.compute_nics.speed_bytes_s * t.efficiency
    return nic * nodes_per_domain / max(1, groups_per_node) / ratio * (1.0 - t.tail_penalty)


def resolve(cluster: Cluster, ranks: int, ranks_per_node: int, groups_per_node: int,
            span_nodes: int | None = None) -> Links:
    """The links of a communicator of ``ranks`` ranks, ``ranks_per_node`` per node, block placement."""
    g = cluster.gpus_per_node
    nodes_in_domain = max(1, cluster.scale_up.domain_gpus // g)
    rpd = min(ranks, ranks_per_node * nodes_in_domain, cluster.scale_up.domain_gpus)
    domains = math.ceil(ranks / rpd)
    nodes = span_nodes or math.ceil(ranks / ranks_per_node)
    ratio, tier = crossed(cluster, nodes)
    t = cluster.fabric.transport
    link = cluster.scale_up.link
    nics = cluster.compute_nics
    return Links(
        ranks=ranks, ranks_per_domain=rpd, domains=domains, nodes=nodes,
        intra_bw_bytes_s=scale_up_bw(cluster),
        net_bw_bytes_s=network_bw(cluster, min(nodes_in_domain, nodes), groups_per_node, ratio),
        net_lat_scale=t.latency_s / (NET_REFERENCE_LAT_US * units.US),
        intra_hw="pci" if link.name.startswith("pcie") else "nvlink",
        scale_up_name=link.name,
        net_name=f"{nics.per_node}x{nics.speed_bytes_s / units.Gbit:g}G {t.name}",
        crossed_ratio=ratio, crossed_tier=tier, tail_penalty=t.tail_penalty,
    )
