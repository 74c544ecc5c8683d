"""Build the topology graph of a cluster: GPUs on their scale-up switch, NICs, the scale-out fabric
(:mod:`.fattree` or :mod:`.dragonfly`, sized by :mod:`.shape`), the storage vertices (:mod:`.storage`) and the
long haul between sites (:mod:`.sites`).

Kept apart from :mod:`.fabric` (the :class:`~slowlink.topology.fabric.Topology` data structure the builders
fill in) so that no module of this package imports one that imports it back.
"""

from __future__ import annotations

from slowlink.catalog.scale_up import SCALE_UP_EFFICIENCY
from slowlink.errors import SpecError
from slowlink.spec.cluster import Cluster
from slowlink.topology import degraded, dragonfly, fattree, sites, storage
from slowlink.topology.fabric import Topology
from slowlink.topology.shape import placement_nodes


def _scale_up(topo: Topology, cluster: Cluster) -> None:
    bw = cluster.scale_up.bw_bytes_s * SCALE_UP_EFFICIENCY
    lat = cluster.scale_up.link.latency_s / 2
    n = cluster.gpus
    ids = topo.add_links([f"gpu:{g}" for g in range(n)], [f"nvsw:{g // topo.domain_gpus}" for g in range(n)],
                         [bw] * n, [lat] * n)
    topo.gpu_up.extend(up for up, _ in ids)
    topo.gpu_down.extend(down for _, down in ids)


def _nics(topo: Topology, cluster: Cluster) -> list[str]:
    """Compute NIC vertices in NIC-index order, with their links to a placeholder (the switch is set later)."""
    return [f"nic:{n}:{i}" for n in range(cluster.nodes) for i in range(topo.nics_per_node)]


def build(cluster: Cluster) -> Topology:
    """The compute fabric of ``cluster`` (and its storage, when ``cluster.storage`` is given), sized by
    :func:`slowlink.topology.shape.fabric_shape`. Cost: O(GPUs + NICs + switch links) time and memory."""
    f = cluster.fabric
    topo = Topology(gpus_per_node=cluster.gpus_per_node, nics_per_node=max(1, cluster.compute_nics.per_node),
                    domain_gpus=min(cluster.scale_up.domain_gpus, cluster.gpus),
                    node_of_block=placement_nodes(cluster), kind=f.topology, arch=cluster.gpu.arch,
                    adaptive=f.routing == "adaptive", ecmp_seed=f.ecmp_seed)
    _scale_up(topo, cluster)
    if cluster.compute_nics.per_node == 0:
        degraded.apply(topo, cluster)
        return topo
    endpoints = _nics(topo, cluster)
    line = cluster.compute_nics.speed_bytes_s
    caps = [line * f.transport.efficiency] * len(endpoints)
    targets = storage.converged_endpoints(cluster)
    if targets:
        topo.storage_endpoint0 = len(endpoints)
        endpoints += [name for name, _ in targets]
        caps += [cap for _, cap in targets]
    if cluster.sites is None:
        _fabric(topo, cluster, endpoints, caps)
    else:  # each site a fabric of its own nodes, and the long haul between them
        sites.build_site_fabrics(topo, cluster, endpoints, caps, _fabric)
    storage.attach(topo, cluster)
    degraded.apply(topo, cluster)  # the cluster's slow NICs, cables and nodes (spec `degraded:`)
    return topo


def _fabric(topo: Topology, cluster: Cluster, endpoints: list[str], caps: list[float]) -> None:
    """The scale-out fabric of ``cluster``'s fabric: section over ``endpoints``."""
    if cluster.fabric.topology == "dragonfly":
        if len(endpoints) > cluster.nodes * topo.nics_per_node:
            raise SpecError("storage.shared_with_compute (True) on a dragonfly fabric is not built: use a "
                            "separate storage fabric (nics.storage) or a fat tree")
        dragonfly.build_dragonfly(topo, cluster, endpoints, caps)
    else:
        fattree.build_fat_tree(topo, cluster, endpoints, caps)
