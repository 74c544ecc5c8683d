"""Storage targets on the graph: on the compute fabric (converged) or behind their own storage switch.

Converged (``storage.shared_with_compute``): each target ``stor:<t>`` is one more endpoint of the compute
fabric, on storage leaves of their own after the compute leaves (so the leaves' uplinks and the spines are
shared with NCCL); a node writes through its compute NICs. Separate: each node's storage NICs
(``snic:<node>``, line rate x efficiency) reach a storage switch ``storsw`` to which the targets attach;
no link is shared with compute traffic. A target's link carries ``storage.write_bytes_s / targets``.
"""

from __future__ import annotations

from slowlink.errors import SpecError
from slowlink.sim.engine import Flow
from slowlink.spec.cluster import Cluster
from slowlink.topology.fabric import Topology, mix


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


def checkpoint_flows(topo: Topology, nodes: int, bytes_per_node: float, start_s: float = 0.0,
                     tag: str = "checkpoint") -> list[Flow]:
    """Every node writes ``bytes_per_node`` to target ``node % targets`` (over all its NICs if converged)."""
    if topo.storage_targets == 0:
        raise SpecError("storage (None) must be given in the cluster file to simulate a checkpoint burst")
    flows: list[Flow] = []
    for n in range(nodes):
        t = n % topo.storage_targets
        if topo.storage_shared:
            dst = topo.storage_endpoint0 + t
            for i in range(topo.nics_per_node):
                a = n * topo.nics_per_node + i
                for w, path in topo.nic_paths(a, dst, mix(topo.ecmp_seed, a, dst, 0xC4E)):
                    flows.append(Flow(path, bytes_per_node / topo.nics_per_node * w, start_s, tag))
        else:
            key = (f"snic:{n}", "storsw")
            if key not in topo.link_id:
                raise SpecError("nics.storage (None) is needed for a separate storage fabric "
                                "(or set storage.shared_with_compute: true)")
            path = (topo.link_id[key], topo.link_id[("storsw", f"stor:{t}")])
            flows.append(Flow(path, bytes_per_node, start_s, tag))
    return flows
