"""Dragonfly: groups of switches, all-to-all local links inside a group, global links between groups.

Sizing from :func:`slowlink.topology.shape.fabric_shape` (Kim et al., "Technology-driven,
highly-scalable dragonfly topology", ISCA 2008, balanced ``a = 2p = 2h``): ``p`` endpoints per switch,
``a`` switches per group, each with ``h = fabric.dragonfly.global_links_per_switch`` global links; every
pair of groups is joined by ``m`` global links. Every switch link carries the NIC line rate.

Vertices ``df:<group>:<switch>``. Global link ``k`` of the pair (i, j) ends in group i at switch
``((j - i - 1) mod G + k (G - 1)) // h mod a``. Routing is minimal: source switch -> (local) -> the
gateway of the chosen global link -> global -> (local) -> destination switch. ECMP hashes the global
link, dmodk picks it from the destination; adaptive sprays evenly over all ``m`` minimal paths. Not
modelled: Valiant / UGAL non-minimal routing, so adversarial group-to-group traffic is bound by the
``m`` direct global links.
Complexity: O(groups x a^2 + groups^2 x m) links.
"""

from __future__ import annotations

from slowlink.errors import SpecError
from slowlink.spec.cluster import Cluster
from slowlink.topology.fabric import Path, Paths, Topology
from slowlink.topology.shape import fabric_shape


def build_dragonfly(topo: Topology, cluster: Cluster, endpoints: list[str], caps: list[float]) -> None:
    """Add groups, local and global links and the minimal router to ``topo``."""
    f = cluster.fabric
    g_n = f.dragonfly_groups or 0
    n_ep = len(endpoints)
    if g_n < 2 or g_n > n_ep:
        raise SpecError(f"fabric.dragonfly.groups ({g_n}) must be between 2 and the NICs ({n_ep})")
    shape = fabric_shape(cluster)
    a, m = shape.switches_per_group, shape.global_links_per_pair
    line, sw = cluster.compute_nics.speed_bytes_s, f.switch_latency_s
    sw_of = [shape.df_switch(e) for e in range(n_ep)]
    for e, name in enumerate(endpoints):
        gi, s = sw_of[e]
        up, down = topo.add_link(name, f"df:{gi}:{s}", caps[e], f.transport.latency_s / 2 + sw)
        topo.nic_up.append(up)
        topo.nic_down.append(down)
    local: dict[tuple[int, int, int], int] = {}
    for gi in range(g_n):
        for s in range(a):
            for t in range(s + 1, a):
                fw, bw = topo.add_link(f"df:{gi}:{s}", f"df:{gi}:{t}", line, sw)
                local[(gi, s, t)], local[(gi, t, s)] = fw, bw
    glob: dict[tuple[int, int, int], tuple[int, int, int]] = {}  # (i, j, k) -> (link i->j, gw_i, gw_j)

    gateway = shape.df_gateway

    for i in range(g_n):
        for j in range(i + 1, g_n):
            for k in range(m):
                gi, gj = gateway(i, j, k), gateway(j, i, k)
                fw, bw = topo.add_link(f"df:{i}:{gi}", f"df:{j}:{gj}", line, sw)
                glob[(i, j, k)], glob[(j, i, k)] = (fw, gi, gj), (bw, gj, gi)
    nu, nd = topo.nic_up, topo.nic_down
    dmodk = f.routing == "dmodk"

    def hop(gi: int, s: int, t: int) -> Path:
        return () if s == t else (local[(gi, s, t)],)

    def via(a_: int, b_: int, k: int) -> Path:
        (gs, ss), (gt, st) = sw_of[a_], sw_of[b_]
        link, gw_s, gw_t = glob[(gs, gt, k)]
        return (nu[a_], *hop(gs, ss, gw_s), link, *hop(gt, gw_t, st), nd[b_])

    def route(a_: int, b_: int, hsh: int) -> Paths:
        (gs, ss), (gt, st) = sw_of[a_], sw_of[b_]
        if gs == gt:
            return [(1.0, (nu[a_], *hop(gs, ss, st), nd[b_]))]
        if topo.adaptive:
            return [(1.0 / m, via(a_, b_, k)) for k in range(m)]
        return [(1.0, via(a_, b_, (b_ if dmodk else hsh) % m))]

    topo.route = route
