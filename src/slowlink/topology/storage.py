"""Storage targets on the graph: on the compute fabric (converged) or behind their own storage switch.

Converged (``storage.shared_with_compute``): each target ``stor:<t>`` is one more endpoint of the compute
fabric, on storage leaves of their own after the compute leaves (so the leaves' uplinks and the spines are
shared with NCCL); a node writes through its compute NICs. Separate: each node's storage NICs
(``snic:<node>``, line rate x efficiency) reach a storage switch ``storsw`` to which the targets attach;
no link is shared with compute traffic. A target's link carries ``storage.write_bytes_s / targets``.
"""

from __future__ import annotations

from slowlink.spec.cluster import Cluster
from slowlink.topology.fabric import Topology


def converged_endpoints(cluster: Cluster) -> list[tuple[str, float]]:
    """(vertex, link capacity) of each storage target that sits on the compute fabric; [] if none."""
    st = cluster.storage
    if st is None or not st.shared_with_compute:
        return []
    return [(f"stor:{t}", st.write_bytes_s / st.targets) for t in range(st.targets)]


def attach(topo: Topology, cluster: Cluster) -> None:
    """Record the converged targets, or build the separate storage fabric (when ``nics.storage`` exists)."""
    st = cluster.storage
    if st is None:
        return
    topo.storage_targets = st.targets
    topo.storage_shared = st.shared_with_compute
    if st.shared_with_compute or cluster.storage_nics is None or cluster.storage_nics.per_node == 0:
        return
    lat = cluster.fabric.switch_latency_s
    snic = cluster.storage_nics.node_bytes_s * cluster.fabric.transport.efficiency
    for n in range(cluster.nodes):
        topo.add_link(f"snic:{n}", "storsw", snic, cluster.fabric.transport.latency_s / 2 + lat)
    for t in range(st.targets):
        topo.add_link("storsw", f"stor:{t}", st.write_bytes_s / st.targets, lat)
