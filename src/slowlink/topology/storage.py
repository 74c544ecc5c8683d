"""Storage targets on the graph: on the compute fabric (converged) or behind their own storage switch.

Converged (``storage.shared_with_compute``): a storage leaf ``leaf:stor`` joins the spines like any other
leaf (uplinks of the compute leaves' size) and each target ``stor:<t>`` hangs off it; a node writes through
its compute NICs. Separate: each node's storage NICs (``snic:<node>``, line rate x efficiency) reach a
storage switch ``storsw`` to which the targets attach; no link is shared with compute traffic.
A target's link carries ``storage.write_bytes_s / targets``.
"""

from __future__ import annotations

from slowlink.errors import SpecError
from slowlink.sim.engine import Flow
from slowlink.spec.cluster import Cluster
from slowlink.topology.fabric import Topology


def add_storage(topo: Topology, cluster: Cluster) -> None:
    """Attach ``cluster.storage``'s targets to ``topo`` (see the module docstring)."""
    st = cluster.storage
    if st is None:
        raise SpecError("storage (None) must be given in the cluster file to simulate storage traffic")
    per_target = st.write_bytes_s / st.targets
    lat = cluster.fabric.switch_latency_s
    if st.shared_with_compute:
        if not topo.spines:
            raise SpecError("storage.shared_with_compute (True) needs a fabric with spines (>= 2 leaves)")
        some_leaf = next(iter(topo.nic_leaf.values()))
        cap = topo.capacity_bytes_s[topo.link_id[(some_leaf, topo.spines[0])]]
        for s in topo.spines:
            topo.add_link("leaf:stor", s, cap, lat)
        hub = "leaf:stor"
    else:
        if cluster.storage_nics is None or cluster.storage_nics.per_node == 0:
            raise SpecError("nics.storage (None) is needed for a separate storage fabric "
                            "(or set storage.shared_with_compute: true)")
        snic = cluster.storage_nics.node_bytes_s * cluster.fabric.transport.efficiency
        for n in range(cluster.nodes):
            topo.add_link(f"snic:{n}", "storsw", snic, cluster.fabric.transport.latency_s / 2 + lat)
        hub = "storsw"
    for t in range(st.targets):
        topo.add_link(hub, f"stor:{t}", per_target, lat)
    topo.storage_targets = st.targets
    topo.storage_shared = st.shared_with_compute


def checkpoint_flows(topo: Topology, nodes: int, bytes_per_node: float, start_s: float = 0.0) -> list[Flow]:
    """Every node writes ``bytes_per_node`` to target ``node % targets`` (spread over its NICs)."""
    flows: list[Flow] = []
    for n in range(nodes):
        t = f"stor:{n % topo.storage_targets}"
        if topo.storage_shared:
            for i in range(topo.nics_per_node):
                nic = f"nic:{n}:{i}"
                leaf = topo.nic_leaf[nic]
                k = (n + i) % len(topo.spines) if topo.adaptive else topo._ecmp(("ckpt", n, i))
                spine = topo.spines[k]
                path: tuple[int, ...] = (topo.link_id[(nic, leaf)], topo.link_id[(leaf, spine)],
                        topo.link_id[(spine, "leaf:stor")], topo.link_id[("leaf:stor", t)])
                flows.append(Flow(path, bytes_per_node / topo.nics_per_node, start_s, "checkpoint"))
        else:
            path = (topo.link_id[(f"snic:{n}", "storsw")], topo.link_id[("storsw", t)])
            flows.append(Flow(path, bytes_per_node, start_s, "checkpoint"))
    return flows
