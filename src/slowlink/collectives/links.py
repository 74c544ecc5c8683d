"""The links a communicator's traffic crosses, and the bandwidth each gives it (bytes/s, SI).

Inside the scale-up domain: the link's per-GPU rate x :data:`SCALE_UP_EFFICIENCY`. Across domains: the
compute NICs the communicator's GPUs reach x speed x ``transport.efficiency``, each NIC shared by the
communicators using it (:func:`slowlink.topology.nic.nic_share`, the flow builders' rule), reduced
by the transport's ``tail_penalty`` (untuned RoCE). The fabric's uplink stages slow it only by the traffic
that crosses them, per traffic pattern (:meth:`Links.for_pattern`, from the group's crossings:
:mod:`slowlink.collectives.communicator`, :mod:`slowlink.topology.crossing`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from slowlink import units
from slowlink.collectives.communicator import Group
from slowlink.collectives.constants import NET_REFERENCE_LAT_US, SCALE_UP_EFFICIENCY
from slowlink.spec.cluster import Cluster
from slowlink.topology.crossing import NONE, Crossing
from slowlink.topology.degraded import NO_PENALTY, Penalty
from slowlink.topology.nic import group_nics


@dataclass(frozen=True)
class Links:
    """What one communicator sees of the cluster."""

    ranks: int
    ranks_per_domain: int       # ranks of this communicator inside one scale-up domain
    domains: int                # scale-up domains the communicator spans (NCCL's "nodes")
    nodes: int                  # physical nodes spanned
    domain_nodes: int           # nodes of one domain this communicator occupies (their NICs serve the domain)
    domain_nics: int            # network channels of one domain: the NICs affine to its members there
                                # (communicator.domain_channels), whose bandwidth net_bw_bytes_s sums
    intra_bw_bytes_s: float     # NCCL-achievable scale-up bandwidth per rank
    net_bw_bytes_s: float       # network bandwidth of one domain for this communicator, after sharing
                                # (and, after for_pattern, after the fabric stage that binds)
    net_lat_scale: float        # transport latency / NCCL's 14 us reference
    intra_hw: str               # 'nvlink' or 'pci' (NCCL's latency row)
    scale_up_name: str
    net_name: str
    tail_penalty: float
    group: Group | None = None
    crossed: Crossing = NONE    # the fabric stage that slows this pattern (for_pattern), NONE if the NICs bind
    degraded: Penalty = NO_PENALTY  # what the cluster's degraded parts cost this pattern (for_pattern); the
                                    # algorithms add its extra_hop_lat_s to each network hop

    def for_pattern(self, pattern: str) -> Links:
        """These links as a traffic pattern (ring, tree, a2a, p2p) sees them: the network bandwidth divided
        by how much the fabric stage it crosses the most slows it (1 when the NICs bind), or by the slowest
        degraded NIC it crosses when that is slower; a delayed node adds its share to each network hop."""
        if self.group is None or self.domains <= 1:
            return self
        c, pen = self.group.crossing_for(pattern), self.group.penalty_for(pattern)
        if c.stage is None and not pen:
            return self
        # A slow NIC and a loaded stage bind one at a time: the slower of the two sets the bandwidth term.
        return replace(self, net_bw_bytes_s=self.net_bw_bytes_s / max(c.factor, pen.factor), crossed=c,
                       degraded=pen)


def scale_up_bw(cluster: Cluster) -> float:
    """Per-rank NCCL-achievable scale-up bandwidth: line rate x SCALE_UP_EFFICIENCY (see constants)."""
    return cluster.scale_up.bw_bytes_s * SCALE_UP_EFFICIENCY


def network_bw(cluster: Cluster, nodes_per_domain: int, groups_per_node: int,
               nic_share: float | None = None) -> float:
    """A domain's NIC bandwidth for one communicator.

    share x speed x transport.efficiency x nodes in the domain x (1 - tail), where share is the NICs' worth
    of a node the communicator's GPUs reach (:func:`slowlink.topology.nic.nic_share`: a GPU sends only
    by its own NICs, as NCCL does), or, for a Group not placed, nics / groups_per_node.
    """
    t = cluster.fabric.transport
    share = cluster.compute_nics.per_node / max(1, groups_per_node) if nic_share is None else nic_share
    return share * cluster.compute_nics.speed_bytes_s * t.efficiency * nodes_per_domain * (1.0 - t.tail_penalty)


def resolve(cluster: Cluster, group: Group) -> Links:
    """The links of ``group`` (its crossings already attached: ``communicator.with_crossing``)."""
    ranks, ranks_per_node, groups_per_node = group.ranks, group.ranks_per_node, group.groups_per_node
    g = cluster.gpus_per_node
    nodes = group.span_nodes or math.ceil(ranks / ranks_per_node)
    if group.domain is not None:  # placed: its members per domain, on the nodes they occupy there
        rpd, domain_nodes, domains, domain_nics = group.domain
    else:  # block placement: ranks_per_node on each node of a domain, local GPUs 0.. (block_groups)
        nodes_in_domain = max(1, cluster.scale_up.domain_gpus // g)
        rpd = min(ranks, ranks_per_node * nodes_in_domain, cluster.scale_up.domain_gpus)
        domains = math.ceil(ranks / rpd)
        domain_nodes = min(nodes_in_domain, nodes)
        domain_nics = domain_nodes * len(group_nics(max(1, cluster.compute_nics.per_node), g,
                                                    range(min(ranks_per_node, g))))
    t = cluster.fabric.transport
    link = cluster.scale_up.link
    nics = cluster.compute_nics
    return Links(
        ranks=ranks, ranks_per_domain=rpd, domains=domains, nodes=nodes, domain_nodes=domain_nodes,
        domain_nics=domain_nics,
        intra_bw_bytes_s=scale_up_bw(cluster),
        net_bw_bytes_s=network_bw(cluster, domain_nodes, groups_per_node, group.nic_share),
        net_lat_scale=t.latency_s / (NET_REFERENCE_LAT_US * units.US),
        intra_hw="pci" if link.name.startswith("pcie") else "nvlink",
        scale_up_name=link.name,
        net_name=f"{nics.per_node}x{nics.speed_bytes_s / units.Gbit:g}G {t.name}",
        tail_penalty=t.tail_penalty, group=group,
    )
