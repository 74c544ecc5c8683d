"""The long haul between sites as graph edges: each site's egress to a wide-area vertex, for the flow simulator.

Vertices: ``site:<name>`` (a site's border) and ``wan`` (the long haul, non-blocking between borders). Edges, per
site: ``site:<name> <-> wan`` of capacity ``interconnect.links x speed_gbit_s`` (its egress, each direction), latency
RTT / 2 on the way out and 0 on the way in, so a crossing costs one one-way delay. A site holds its nodes in the
cluster's order (``sites:`` in order; node ``k`` in the site whose running node count passes ``k``); storage
endpoints are in the first site.

Routing: a flow between NICs of one site keeps the fabric's route; a flow between sites goes NIC uplink -> its
site's egress -> the other site's ingress -> NIC downlink (the in-site hops to the border are left out: the long
haul, hundreds of times slower and longer, bounds it). The edges carry the line rate: a stream's window and loss
limits (``slowlink.sites.transport``) are the analytical model's, not the flow engine's. Complexity: O(sites) links,
O(1) per route.
"""

from __future__ import annotations

import bisect
import itertools

import numpy as np

from slowlink.spec.cluster import Cluster
from slowlink.topology.fabric import Paths, Topology


def add_long_haul(topo: Topology, cluster: Cluster) -> None:
    """Add each site's egress to ``topo`` and route flows between sites over it (module docstring); nothing for a
    one-site cluster or a cluster without a scale-out fabric."""
    sites = cluster.sites
    if sites is None or topo.route is None:
        return
    ic = sites.interconnect
    edges = [topo.add_link(f"site:{s.name}", "wan", ic.egress_bytes_s, ic.rtt_s / 2.0) for s in sites.sites]
    for _, back in edges:
        topo.latency_s[back] = 0.0  # one one-way delay per crossing, charged on the way out
    ends = list(itertools.accumulate(s.nodes for s in sites.sites))  # first node past each site
    nics = topo.nics_per_node
    n_compute = cluster.nodes * nics
    node_site = np.asarray([bisect.bisect_right(ends, k) for k in range(cluster.nodes)], dtype=np.int64)
    up = np.asarray([e[0] for e in edges], dtype=np.int64)
    down = np.asarray([e[1] for e in edges], dtype=np.int64)
    nu, nd = topo.nic_up, topo.nic_down
    inner, inner_array = topo.route, topo.route_array

    def site(nic: int) -> int:
        return int(node_site[nic // nics]) if nic < n_compute else 0

    def route(a: int, b: int, h: int) -> Paths:
        sa, sb = site(a), site(b)
        if sa == sb:
            return inner(a, b, h)
        return [(1.0, (nu[a], edges[sa][0], edges[sb][1], nd[b]))]

    topo.route = route
    if inner_array is None:
        return
    nu_a, nd_a = np.asarray(nu, dtype=np.int64), np.asarray(nd, dtype=np.int64)

    def sites_of(x: np.ndarray) -> np.ndarray:
        out = np.zeros(x.shape, dtype=np.int64)
        compute = x < n_compute
        out[compute] = node_site[x[compute] // nics]
        return out

    def route_array(a: np.ndarray, b: np.ndarray, h: np.ndarray) -> np.ndarray:
        paths = inner_array(a, b, h)
        sa, sb = sites_of(a), sites_of(b)
        cross = sa != sb
        if not cross.any():
            return paths
        out = np.full((len(a), max(paths.shape[1], 4)), -1, dtype=np.int64)
        out[:, : paths.shape[1]] = paths
        out[cross] = -1
        out[cross, 0], out[cross, 1] = nu_a[a[cross]], up[sa[cross]]
        out[cross, 2], out[cross, 3] = down[sb[cross]], nd_a[b[cross]]
        return out

    topo.route_array = route_array
