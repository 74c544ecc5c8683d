"""Sites in the flow simulator's graph: each site's own scale-out fabric, and the long haul between them as edges
from each site's border to a wide-area vertex.

Each site is built as a cluster of its own nodes on its fabric (its ``fabric:`` section, else the cluster's; the
converged storage targets with the first site), by the same fabric builders and sizing rule as one cluster, its
switch vertices named ``<site>/<vertex>``; two buildings share no switch, as the bill of materials counts them.

Vertices: ``site:<name>`` (a site's border) and ``wan`` (the long haul, non-blocking between borders). Edges, per
site: ``site:<name> <-> wan`` of capacity ``interconnect.links x speed_gbit_s`` (its egress, each direction), latency
RTT / 2 on the way out and 0 on the way in, so a crossing costs one one-way delay. A site holds its nodes in the
cluster's order (``sites:`` in order; node ``k`` in the site whose running node count passes ``k``); storage
endpoints are in the first site.

Routing: a flow between NICs of one site takes its site fabric's route; a flow between sites goes NIC uplink -> its
site's egress -> the other site's ingress -> NIC downlink (the in-site hops to the border are left out: the long
haul, hundreds of times slower and longer, bounds it). The edges carry the line rate: a stream's window and loss
limits (``slowlink.sites.transport``) are the analytical model's, not the flow engine's. Complexity: O(sites) links,
O(1) per route.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from slowlink.spec.cluster import Cluster
from slowlink.topology.fabric import Paths, Topology

FabricBuilder = Callable[[Topology, Cluster, list[str], list[float]], None]  # fat tree or dragonfly (build.py)


def build_site_fabrics(topo: Topology, cluster: Cluster, endpoints: list[str], caps: list[float],
                       fabric: FabricBuilder) -> None:
    """Each site's own fabric into ``topo`` (module docstring), routed within each site by its own router, then the
    long haul (:func:`add_long_haul`). ``endpoints``: every compute NIC in node order, then the converged storage
    targets; ``caps``: their links' capacities on the cluster's fabric."""
    sites = cluster.sites
    if sites is None:
        fabric(topo, cluster, endpoints, caps)
        return
    own = dict(cluster.site_fabrics)
    nics = topo.nics_per_node
    n_compute = cluster.nodes * nics
    first = 0
    parts: list[tuple[Topology, int, int]] = []  # (site topology, link id offset, first global NIC)
    storage_up: list[int] = []
    storage_down: list[int] = []
    for i, site in enumerate(sites.sites):
        fab = own.get(site.name, cluster.fabric)
        one = replace(cluster, name=site.name, nodes=site.nodes, fabric=fab, sites=None, site_fabrics=(),
                      storage=cluster.storage if i == 0 else None)
        lo, hi = first * nics, (first + site.nodes) * nics
        k = fab.transport.efficiency / cluster.fabric.transport.efficiency  # a NIC link at its site's efficiency
        eps = endpoints[lo:hi] + (endpoints[n_compute:] if i == 0 else [])
        cps = [c * k for c in caps[lo:hi]] + (caps[n_compute:] if i == 0 else [])
        t = Topology(gpus_per_node=topo.gpus_per_node, nics_per_node=nics, domain_gpus=topo.domain_gpus,
                     node_of_block=list(range(site.nodes)), kind=fab.topology, arch=topo.arch,
                     adaptive=fab.routing == "adaptive", ecmp_seed=fab.ecmp_seed)
        fabric(t, one, eps, cps)
        off = _merge(topo, t, site.name)
        topo.nic_up.extend(x + off for x in t.nic_up[: hi - lo])
        topo.nic_down.extend(x + off for x in t.nic_down[: hi - lo])
        storage_up += [x + off for x in t.nic_up[hi - lo:]]
        storage_down += [x + off for x in t.nic_down[hi - lo:]]
        parts.append((t, off, lo))
        first += site.nodes
    topo.nic_up.extend(storage_up)
    topo.nic_down.extend(storage_down)
    _route_in_sites(topo, cluster, parts)
    add_long_haul(topo, cluster)


def _merge(topo: Topology, t: Topology, site: str) -> int:
    """Append ``t``'s links to ``topo``, its switch vertices renamed ``<site>/<vertex>``; returns the id offset."""
    off = len(topo.capacity_bytes_s)

    def name(v: str) -> str:
        return v if v.startswith(("nic:", "stor:")) else f"{site}/{v}"

    topo.capacity_bytes_s.extend(t.capacity_bytes_s)
    topo.latency_s.extend(t.latency_s)
    for i, n in enumerate(t.names):
        u, v = n.split("->")
        topo.names.append(f"{name(u)}->{name(v)}")
        topo.link_id[(name(u), name(v))] = off + i
    return off


def _route_in_sites(topo: Topology, cluster: Cluster, parts: list[tuple[Topology, int, int]]) -> None:
    """``topo``'s router over the sites' own routers: a global NIC index to its site's local one, link ids back
    to global (flows between sites are :func:`add_long_haul`'s)."""
    nics = topo.nics_per_node
    n_compute = cluster.nodes * nics
    ends = [lo for _, _, lo in parts[1:]] + [n_compute]

    def local(a: int) -> tuple[int, int]:
        if a >= n_compute:  # a storage target: with the first site, after its NICs
            return 0, ends[0] + (a - n_compute)
        s = bisect.bisect_right(ends, a)
        return s, a - parts[s][2]

    def route(a: int, b: int, h: int) -> Paths:
        (sa, la), (_, lb) = local(a), local(b)  # one site (add_long_haul routes between sites)
        t, off, _ = parts[sa]
        return [(w, tuple(x + off for x in path)) for w, path in t.nic_paths(la, lb, h)]

    topo.route = route
    if any(t.route_array is None for t, _, _ in parts):
        topo.route_array = None
        return
    first = np.asarray([lo for _, _, lo in parts], dtype=np.int64)
    bounds = np.asarray(ends, dtype=np.int64)

    def route_array(a: np.ndarray, b: np.ndarray, h: np.ndarray) -> np.ndarray:
        sa = np.where(a >= n_compute, 0, np.searchsorted(bounds, a, side="right"))
        la = np.where(a >= n_compute, bounds[0] + a - n_compute, a - first[np.minimum(sa, len(parts) - 1)])
        sb = np.where(b >= n_compute, 0, np.searchsorted(bounds, b, side="right"))
        lb = np.where(b >= n_compute, bounds[0] + b - n_compute, b - first[np.minimum(sb, len(parts) - 1)])
        blocks = []
        for s, (t, off, _) in enumerate(parts):
            rows = np.flatnonzero((sa == s) & (sb == s))
            if len(rows) and t.route_array is not None:
                p = t.route_array(la[rows], lb[rows], h[rows])
                blocks.append((rows, np.where(p >= 0, p + off, -1)))
        width = max([p.shape[1] for _, p in blocks] + [2])
        out = np.full((len(a), width), -1, dtype=np.int64)
        for rows, p in blocks:
            out[rows, : p.shape[1]] = p
        return out  # rows between sites stay -1 here: add_long_haul routes them

    topo.route_array = route_array


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
