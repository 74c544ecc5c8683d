"""Checkpoint bursts as flows on the topology graph: every node writes to the storage targets at once."""

from __future__ import annotations

from slowlink.errors import SpecError
from slowlink.sim.engine import Flow
from slowlink.topology.fabric import Topology, mix


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
