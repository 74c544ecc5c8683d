"""How much of a traffic pattern crosses each uplink stage, against what the nodes' NICs carry.

A collective's bandwidth term is set by its busiest resource. The analytical algorithms are written for
the NICs (every node sends its share through its own NICs); a stage of the fabric (a leaf's uplinks, a
pod's, a dragonfly group's global links) slows the collective only where the traffic that really crosses
it needs longer there than at the busiest NIC:

    factor = max(1, max over stage domains D and directions of  load(D) / uplink(D)
                    / max over nodes n and directions of        load(n) / nic(n))

with loads summed over every concurrent communicator (a busy job), in any consistent unit. This is the
max-min fluid bound of the pattern with traffic spread evenly over a domain's uplinks (adaptive routing or
a contention-free static routing; ECMP hash collisions come on top, see :mod:`slowlink.sim`). A ring that
crosses a leaf boundary once per channel needs o / nodes_per_leaf of a NIC there, so it feels a leaf's
o:1 only when o exceeds the nodes it has under that leaf; an all_to_all sends (n - m_D) / n of every
member's bytes out of a domain holding m_D members (bisection-bound), so it feels nearly the full ratio.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from slowlink.topology.shape import FabricShape, Stage


@dataclass(frozen=True)
class Crossing:
    """How much a stage slows a pattern: ``factor`` >= 1, the stage (index into ``FabricShape.stages``,
    None if no stage binds) and its oversubscription ratio."""

    factor: float = 1.0
    stage: int | None = None
    stage_name: str = ""
    ratio: float = 1.0
    what: str = ""


NONE = Crossing()


def _worst(shape: FabricShape, t_nic: float, loads: list[float]) -> Crossing:
    """The stage whose time (load / capacity) exceeds the NICs' by the most, or NONE."""
    best = NONE
    for i, (st, t) in enumerate(zip(shape.stages, loads, strict=True)):
        f = t / t_nic
        if f > best.factor * (1 + 1e-9):
            best = Crossing(f, i, st.name, st.ratio, st.what)
    return best


def _local_time(shape: FabricShape, gs: np.ndarray, ss: np.ndarray, gd: np.ndarray, sd: np.ndarray,
                w: np.ndarray) -> float:
    """Busiest dragonfly local link / line rate, switch-to-switch traffic ``w`` from (group gs, switch ss)
    to (gd, sd) under minimal routing spread evenly over the m global links of a pair: inside a group one
    local hop; across, a local hop to the gateway of global link k and one from the far gateway. Loads are
    summed in units of 1 / m of a transfer (the whole ``w`` per gateway hop, ``m w`` inside a group) and scaled
    once: sums of whole weights stay whole, the same in any order (groups priced as shifted copies, written
    out or not, give the same number)."""
    a, m = shape.switches_per_group, max(1, shape.global_links_per_pair)
    keys, loads = [], []
    same = gs == gd
    keys.append((gs[same] * a + ss[same]) * a + sd[same])
    loads.append(w[same] * m * (ss[same] != sd[same]))
    x = ~same
    gsx, gdx, ssx, sdx, wx = gs[x], gd[x], ss[x], sd[x], w[x]  # the edges across groups, read once
    from_s, to_d = gsx * a + ssx, gdx * a
    for k in range(m):
        gw_s, gw_d = shape.df_gateway(gsx, gdx, k), shape.df_gateway(gdx, gsx, k)
        keys += [from_s * a + gw_s, (to_d + gw_d) * a + sdx]
        loads += [wx * (ssx != gw_s), wx * (gw_d != sdx)]
    key, load = np.concatenate(keys), np.concatenate(loads)
    if len(key) == 0:
        return 0.0
    return float(np.bincount(key, load).max()) / m / shape.line_bytes_s


def _local_time_nodes(shape: FabricShape, src: np.ndarray, dst: np.ndarray, w: np.ndarray) -> float:
    """:func:`_local_time` of node-to-node traffic, each node's share spread over its NICs (rail to rail): every NIC
    carries ``w`` in units of 1 / NICs of a transfer, scaled once."""
    nics, epg, p = shape.nics_per_node, shape.endpoints_per_group, shape.endpoints_per_leaf
    if p % nics == 0 and epg % nics == 0:  # a node's NICs all on one switch: its edges' NICs load the same links
        se, de, ww = src * nics, dst * nics, w * nics
    else:
        se = (src[:, None] * nics + np.arange(nics)).ravel()
        de = (dst[:, None] * nics + np.arange(nics)).ravel()
        ww = np.repeat(w, nics)
    return _local_time(shape, se // epg, (se % epg) // p, de // epg, (de % epg) // p, ww) / nics


def _busiest(keys: np.ndarray, w: np.ndarray | float) -> float:
    """The largest total weight of one key: ``w`` per edge, or one weight for every edge (then counted as
    integers and scaled once: the same number as summing that weight, exact below 2**53 edges)."""
    if isinstance(w, float):
        return float(np.bincount(keys).max()) * w
    return float(np.bincount(keys, w).max())


def _domain_counts(st: Stage, src: np.ndarray, dst: np.ndarray, node_out: np.ndarray,
                   node_in: np.ndarray) -> tuple[float, float] | None:
    """Most edges leaving one of the stage's domains and most entering one (edges counted, not weighed; None
    if no edge crosses): from the crossing edges, or, when most edges cross, from the nodes' edge counts
    ``node_out``/``node_in`` summed per domain less the edges inside it (whole numbers: the same counts)."""
    npd = st.nodes_per_domain
    ds, dd = src // npd, dst // npd
    cross = ds != dd
    n_cross = int(np.count_nonzero(cross))
    if n_cross == 0:
        return None
    if 2 * n_cross <= cross.size:
        out, into = np.bincount(ds[cross]), np.bincount(dd[cross])
    else:
        starts = np.arange(0, node_out.size, npd)  # node_out and node_in: one count per node, as many nodes
        inside = np.bincount(ds[~cross], minlength=starts.size)
        out, into = np.add.reduceat(node_out, starts) - inside, np.add.reduceat(node_in, starts) - inside
    return float(out.max()), float(into.max())


def _stage_time(shape: FabricShape, st: Stage, src: np.ndarray, dst: np.ndarray, w: np.ndarray | float,
                node_counts: tuple[np.ndarray, np.ndarray] | None) -> float:
    if st.name == "local":
        ww = w if isinstance(w, np.ndarray) else np.full(len(src), w)
        return _local_time_nodes(shape, src, dst, ww)
    if isinstance(w, float) and node_counts is not None:  # one weight on every edge: count, then scale once
        most = _domain_counts(st, src, dst, *node_counts)
        if most is None:
            return 0.0
        t = max(most[0] * w, most[1] * w) / st.uplink_bytes_s
    else:
        ds, dd = src // st.nodes_per_domain, dst // st.nodes_per_domain
        cross = ds != dd
        if not cross.any():
            return 0.0
        # edges inside a domain weigh 0 here (adding 0.0 leaves every sum as it is; cheaper than a masked copy)
        wa = np.where(cross, w, 0.0)
        t = max(_busiest(ds, wa), _busiest(dd, wa)) / st.uplink_bytes_s
    if st.pair_bytes_s is not None:  # a pair of domains' own links (dragonfly groups)
        ds, dd = src // st.nodes_per_domain, dst // st.nodes_per_domain
        cross = ds != dd
        ds, dd, wc = ds[cross], dd[cross], w[cross] if isinstance(w, np.ndarray) else w
        n_dom = int(max(ds.max(), dd.max())) + 1
        t = max(t, _busiest(ds * n_dom + dd, wc) / st.pair_bytes_s)
    return float(t)


def edge_crossing(shape: FabricShape, nic_node_bytes_s: float, src_node: np.ndarray, dst_node: np.ndarray,
                  weight: np.ndarray | float) -> Crossing:
    """Crossing of node-to-node traffic: ``weight[k]`` units from ``src_node[k]`` to ``dst_node[k]`` (a float:
    that many units on every edge).

    ``nic_node_bytes_s`` is what one node's NICs carry (the analytical model's NIC bandwidth per node).
    Cost: O(edges) per stage.
    """
    if not shape.stages or len(src_node) == 0:
        return NONE
    w: np.ndarray | float
    counts: tuple[np.ndarray, np.ndarray] | None = None
    if isinstance(weight, (int, float)):  # one weight on every edge: edges counted (whole numbers), scaled once
        unit = float(weight)
        n_nodes = int(max(src_node.max(), dst_node.max())) + 1
        counts = (np.bincount(src_node, minlength=n_nodes), np.bincount(dst_node, minlength=n_nodes))
        node_t = max(float(counts[0].max()) * unit, float(counts[1].max()) * unit) / nic_node_bytes_s
        w = unit
    else:
        w = np.asarray(weight, dtype=float)
        node_t = max(_busiest(src_node, w), _busiest(dst_node, w)) / nic_node_bytes_s
    if node_t <= 0:
        return NONE
    return _worst(shape, node_t, [_stage_time(shape, st, src_node, dst_node, w, counts) for st in shape.stages])


def counts_by_domain(shape: FabricShape) -> bool:
    """True when every stage's load is the count of edges leaving (or entering) one of its domains: no dragonfly
    local links (a transfer's share of them depends on its direction through the gateways, :func:`_local_time`)
    and no pair of domains' own links (a dragonfly's group pairs, counted per ordered pair). Only then does one
    count serve both ways (:func:`both_ways_crossing`)."""
    return all(st.name != "local" and st.pair_bytes_s is None for st in shape.stages)


def both_ways_crossing(shape: FabricShape, nic_node_bytes_s: float, a_node: np.ndarray, b_node: np.ndarray,
                       weight: float, times: np.ndarray | None = None) -> Crossing:
    """:func:`edge_crossing` of ``weight`` units each way on every edge ``a_node[k]`` - ``b_node[k]`` (a tree's
    reduce up and broadcast down), edge ``k`` present ``times[k]`` times (None: once), from the edges written
    once: every node and every stage domain then sends as many edges as it receives, so one count serves both
    directions (the same whole numbers as the edges written out, on a fraction of the arrays). A dragonfly
    (its local links, its pairs of groups) takes the general rule on the edges written out both ways."""
    if not counts_by_domain(shape):
        src, dst = np.concatenate([a_node, b_node]), np.concatenate([b_node, a_node])
        if times is None:
            return edge_crossing(shape, nic_node_bytes_s, src, dst, weight)
        return edge_crossing(shape, nic_node_bytes_s, src, dst, np.tile(times * float(weight), 2))
    if not shape.stages or len(a_node) == 0:
        return NONE
    unit = float(weight)
    n_nodes = int(max(a_node.max(), b_node.max())) + 1
    per_node = np.bincount(a_node, times, n_nodes) + np.bincount(b_node, times, n_nodes)
    node_t = float(per_node.max()) * unit / nic_node_bytes_s
    if node_t <= 0:
        return NONE
    loads = []
    for st in shape.stages:
        da, db = a_node // st.nodes_per_domain, b_node // st.nodes_per_domain
        cross = da != db
        if not cross.any():
            loads.append(0.0)
            continue
        n_dom = (n_nodes - 1) // st.nodes_per_domain + 1
        t = None if times is None else times[cross]
        most = np.bincount(da[cross], t, n_dom) + np.bincount(db[cross], t, n_dom)
        loads.append(float(most.max()) * unit / st.uplink_bytes_s)
    return _worst(shape, node_t, loads)


def _member_counts(keys: np.ndarray) -> np.ndarray:
    """For a (groups, n) array of domain keys: how many members of its own group share each member's key."""
    g, n = keys.shape
    flat = keys.astype(np.int64) + (np.arange(g, dtype=np.int64)[:, None] * (int(keys.max()) + 1))
    _, inv, counts = np.unique(flat.ravel(), return_inverse=True, return_counts=True)
    out: np.ndarray = counts[inv].reshape(g, n)
    return out


def all_to_all_crossing(shape: FabricShape, nic_node_bytes_s: float, nodes: np.ndarray,
                        scale_up: np.ndarray, copies: int = 1, runs: int = 1) -> Crossing:
    """Crossing of an all_to_all in every group at once: member ``i`` of a group of ``n`` sends 1/n of its
    buffer to each member. ``nodes`` and ``scale_up`` are (groups, n) arrays of each member's physical node
    and scale-up domain. A member's NIC carries (n - m_s) / n (m_s: members in its scale-up domain, reached
    over NVLink); a stage domain holding m_D members sends m_D (n - m_D) / n out. O(groups x n).

    Loads are summed in whole units of 1 / n and scaled once, so that ``copies`` > 1 (each group stands for that
    many on the same nodes) or ``runs`` > 1 (each member for that many, on its node: its scale-up domain
    of one node) give the numbers of the groups written out."""
    if not shape.stages:
        return NONE
    n = int(nodes.shape[1]) * runs
    units = runs * (n - runs * _member_counts(scale_up))  # a member and its runs, in 1 / n of a buffer
    node_t = float(np.bincount(nodes.ravel(), units.ravel()).max() * copies) / n / nic_node_bytes_s
    if node_t <= 0:
        return NONE
    loads = []
    for st in shape.stages:
        if st.name == "local":
            loads.append(_a2a_local_time(shape, nodes, copies, runs))
            continue
        dom = nodes // st.nodes_per_domain
        out = runs * (n - runs * _member_counts(dom))
        t = float(np.bincount(dom.ravel(), out.ravel()).max() * copies) / n / st.uplink_bytes_s
        if st.pair_bytes_s is not None:
            n_dom = int(dom.max()) + 1
            counts = np.zeros((nodes.shape[0], n_dom))
            np.add.at(counts, (np.repeat(np.arange(nodes.shape[0]), nodes.shape[1]), dom.ravel()), 1.0)
            pair = counts.T @ counts  # members of each pair of domains, in 1 / n (whole numbers)
            np.fill_diagonal(pair, 0.0)
            t = max(t, float(pair.max() * (copies * runs * runs)) / n / st.pair_bytes_s)
        loads.append(t)
    return _worst(shape, node_t, loads)


def _a2a_local_time(shape: FabricShape, nodes: np.ndarray, copies: int = 1, runs: int = 1) -> float:
    """Dragonfly local links under every group's all_to_all: switch A sends c_A c_B / n to switch B (c: a
    group's members per switch, each member's NIC share spread over its node's NICs), summed in whole units of
    1 / (NICs^2 n). O(groups x S^2) for the S switches a group touches."""
    nics, epg, p, a = shape.nics_per_node, shape.endpoints_per_group, shape.endpoints_per_leaf, \
        shape.switches_per_group
    n = int(nodes.shape[1]) * runs
    parts = []
    for row in nodes:
        ep = (row[:, None] * nics + np.arange(nics)).ravel()
        sw = (ep // epg) * a + (ep % epg) // p
        ids, counts = np.unique(sw, return_counts=True)
        src, dst = np.meshgrid(ids, ids, indexing="ij")
        parts.append((src.ravel(), dst.ravel(), np.outer(counts, counts).ravel()))
    src = np.concatenate([x[0] for x in parts])
    dst = np.concatenate([x[1] for x in parts])
    w = np.concatenate([x[2] for x in parts]).astype(np.float64) * (copies * runs * runs)
    return _local_time(shape, src // a, src % a, dst // a, dst % a, w) / (nics * nics) / n
