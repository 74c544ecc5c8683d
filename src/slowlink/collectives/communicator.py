"""Communicators on the real cluster: the one place that turns lists of ranks into what the models price.

:func:`communicator` maps every concurrent group of a collective (lists of ranks) through the cluster's
placement onto physical nodes and scale-up domains, and returns the :class:`Group` the analytical model
prices: members per node, nodes spanned, communicators sharing a node's NICs, and for each traffic pattern
the algorithms use (ring, tree, all_to_all, point-to-point) how much the fabric's uplink stages slow it
(:mod:`slowlink.topology.crossing`). The flow simulator follows the same ring order and tree edges.

Orders follow NCCL: a ring visits scale-up domains in the order of their lowest rank and the ranks of a
domain together (``ncclTopoCompute`` builds the intra-node path, the inter-node ring follows the node
ranks); the double binary tree spans the domains in that order (:mod:`slowlink.collectives.nccl_trees`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from slowlink.collectives.nccl_trees import dtree_edge_array, tree_edges
from slowlink.spec.cluster import Cluster, Placement
from slowlink.topology.crossing import (
    NONE,
    Crossing,
    all_to_all_crossing,
    both_ways_crossing,
    edge_crossing,
)
from slowlink.topology.degraded import NO_PENALTY, Penalty, group_penalty
from slowlink.topology.nic import affine_nics, group_nics, nic_share
from slowlink.topology.shape import fabric_shape, placement_nodes

PATTERNS = ("ring", "tree", "a2a", "p2p")


@dataclass(frozen=True)
class Group:
    """A communicator: ``ranks`` ranks, ``ranks_per_node`` of them on each node, and ``groups_per_node``
    identical communicators running at once through each node's compute NICs. ``span_nodes`` (optional)
    overrides the nodes the group spans (default ranks / ranks_per_node, block placement). ``crossing``
    (pattern, :class:`Crossing`) pairs come from :func:`communicator`; a Group made by hand gets them from
    a block placement of its shape."""

    ranks: int
    ranks_per_node: int
    groups_per_node: int = 1
    span_nodes: int | None = None
    crossing: tuple[tuple[str, Crossing], ...] | None = field(default=None, compare=False)
    penalty: tuple[tuple[str, Penalty], ...] = field(default=(), compare=False)  # degraded parts, per pattern
    nic_share: float | None = field(default=None, compare=False)  # NICs' worth of a node's bandwidth it gets
    # (topology.degraded.nic_share: the NICs its GPUs reach, shared with the groups using them); None: a
    # hand-made Group not yet placed, priced at all NICs / groups_per_node
    domain: tuple[int, int, int, int] | None = field(default=None, compare=False)  # placed: (its most ranks in
    # one scale-up domain, the nodes they sit on, the domains it spans, that domain's network channels): a
    # domain's channels are its members' NICs on those nodes (domain_channels); None: block placement,
    # ranks_per_node on every node of a domain

    def crossing_for(self, pattern: str) -> Crossing:
        for name, c in self.crossing or ():
            if name == pattern:
                return c
        return NONE

    def penalty_for(self, pattern: str) -> Penalty:
        """What the cluster's degraded parts cost this pattern (:mod:`slowlink.topology.degraded`)."""
        for name, p in self.penalty:
            if name == pattern:
                return p
        return NO_PENALTY


def patterns_of(op: str) -> tuple[str, ...]:
    """The traffic patterns the algorithms NCCL may pick for ``op`` use."""
    if op == "all_to_all":
        return ("a2a",)
    if op == "send_recv":
        return ("p2p",)
    if op == "all_reduce":
        return ("ring", "tree")
    return ("ring",)


@dataclass(frozen=True)
class Placed:
    """Concurrent groups as (groups, n) arrays: ranks in ring order, their nodes and scale-up domains. Each row
    stands for ``copies`` groups and each member for ``runs`` members, the others shifted by 1, 2, ... ranks on
    the same node and domain (:func:`shifts_apply`; 1 and 1: the groups as they are)."""

    ranks: np.ndarray
    nodes: np.ndarray
    domains: np.ndarray
    copies: int = 1
    runs: int = 1


def place(cluster: Cluster, groups: Sequence[list[int]] | np.ndarray, node_of_block: list[int] | None = None,
          ring_order: bool = True) -> Placed:
    """Map ``groups`` (equal sizes) onto physical nodes and domains, each row in NCCL's ring order (or as
    given, for ``[src, dst]`` pairs)."""
    gpn = cluster.gpus_per_node
    blocks = np.asarray(node_of_block) if node_of_block is not None else _blocks(cluster)
    try:
        ranks = np.asarray(groups, dtype=np.int64)
    except ValueError:  # unequal groups (a scenario's own lists): the first one's size stands
        ranks = np.asarray([g for g in groups if len(g) == len(groups[0])], dtype=np.int64)
    if ring_order and not (ranks[:, 1:] >= ranks[:, :-1]).all():  # rows of dimension_array come sorted
        ranks = np.sort(ranks, axis=1)
    block = ranks // gpn
    # block placement (block b on node b, the default) needs no lookup: a gather over every rank costs ~10x the
    # division at 131k GPUs; a rank past the cluster still reaches the lookup and fails there
    in_order = blocks.size > 0 and blocks[0] == 0 and bool((np.diff(blocks) == 1).all())
    nodes = block if in_order and block.max(initial=-1) < blocks.size else blocks[block]
    dom_gpus = max(1, min(cluster.scale_up.domain_gpus, cluster.gpus))
    # a domain of one node is that node (the general rule below gives the same numbers)
    domains = nodes if dom_gpus == gpn else (nodes * gpn + ranks % gpn) // dom_gpus
    if ring_order and dom_gpus > gpn and not (domains[:, 1:] >= domains[:, :-1]).all():
        # a domain spans nodes: keep its ranks together, domains by their lowest rank (already so where the domains
        # come in order along every group: block placement)
        g, n = ranks.shape
        rows = np.arange(g)[:, None]
        # each member's position of its domain's first member in its group: one unique over every group at once
        _, idx, inv = np.unique((rows * (int(domains.max(initial=0)) + 1) + domains).ravel(), return_index=True,
                                return_inverse=True)
        first = (idx[inv].reshape(g, n) - rows * n)
        order = np.lexsort((np.broadcast_to(np.arange(n), (g, n)), first), axis=1)
        ranks, nodes, domains = ranks[rows, order], nodes[rows, order], domains[rows, order]
    return Placed(ranks, nodes, domains)


_BLOCKS: dict[tuple[int, Placement], np.ndarray] = {}


def _blocks(cluster: Cluster) -> np.ndarray:
    """:func:`placement_nodes` as a read-only array, cached by what it reads (the node count and the placement: a
    few recent ones), so clusters that differ elsewhere share it."""
    key = (cluster.nodes, cluster.placement)
    hit = _BLOCKS.get(key)
    if hit is None:
        if len(_BLOCKS) >= 8:
            _BLOCKS.clear()
        hit = _BLOCKS[key] = np.asarray(placement_nodes(cluster), dtype=np.int64)
        hit.setflags(write=False)
    return hit


def domain_channels(ranks: list[int], nodes: list[int], gpus_per_node: int,
                    nics_per_node: int) -> list[tuple[int, int, int]]:
    """The network channels of a communicator's members in one scale-up domain, as (head rank, node, local
    NIC): one per NIC affine to a member GPU (:func:`affine_nics`), headed by the first member nearest it,
    in ring order. Both models send a domain's network traffic (ring and tree alike) over these, channel
    ``c`` of one domain to channel ``c`` of the next (rail to rail).

    When the domain spans nodes (multi-node NVLink, e.g. GB200 NVL72), NCCL treats the whole clique as one
    node: ``ncclTopoGetSystem`` (src/graph/topo.cc) fuses the topology of every rank of the clique
    (``comm->MNNVL``: ``clique.ranks`` instead of the host's ranks), so ``ncclTopoCompute`` searches rings and
    trees over all the clique's GPUs and NICs, and ``ncclTopoSelectNets`` (src/graph/search.cc) orders the
    NICs GPU first (``ncclTopoPrefNetsGpuFirst``, ``NCCL_MNNVL_SCATTER_NETS_ENABLE``, default on) so
    successive channels leave by NICs of different GPUs, on every tray. A domain's exit traffic is therefore
    spread over all its members' NICs, not only those of the tray whose GPU is last in the ring.
    """
    seen: set[tuple[int, int]] = set()
    out: list[tuple[int, int, int]] = []
    for r, n in zip(ranks, nodes, strict=True):
        for ln in affine_nics(nics_per_node, gpus_per_node, int(r) % gpus_per_node):
            if (int(n), ln) not in seen:
                seen.add((int(n), ln))
                out.append((int(r), int(n), ln))
    return out


def _spans_nodes(cluster: Cluster) -> bool:
    return cluster.scale_up.domain_gpus > cluster.gpus_per_node


def _channel_edges(cluster: Cluster, p: Placed, pairs: list[tuple[int, int]] | None,
                   weight: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Node-to-node edges of domain-to-domain traffic spread over :func:`domain_channels`: for each
    (from, to) pair of domain indices (ring order; None: each domain to the next, a ring), ``weight`` units
    split evenly over the sender's channels, channel ``c`` to the receiver's ``c``-th (mod its count). Edges in
    the order of the groups, then the pairs, then the channels; every group's at once (O(ranks log ranks))."""
    nodes_of, start, count, seg_of_row = _channels_of(cluster, p)
    d = np.diff(seg_of_row)  # domains of each group
    if pairs is None:  # each domain to the next, around, in groups of more than one domain
        row = np.repeat(np.arange(len(d)), d)
        a = np.arange(int(seg_of_row[-1]))
        b = seg_of_row[row] + (a - seg_of_row[row] + 1) % d[row]
        keep = d[row] > 1
        a, b = a[keep], b[keep]
    else:  # the same pairs in every group, those past its domains left out (unequal groups: a scenario's lists)
        pa, pb = np.asarray(pairs, dtype=np.int64).reshape(-1, 2).T
        valid = np.maximum(pa, pb)[None, :] < d[:, None]
        a = (seg_of_row[:-1, None] + pa[None, :])[valid]
        b = (seg_of_row[:-1, None] + pb[None, :])[valid]
    lens = count[a]
    c = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)  # channel c of the sender's
    src = nodes_of[np.repeat(start[a], lens) + c]
    dst = nodes_of[np.repeat(start[b], lens) + c % np.repeat(count[b], lens)]
    return src, dst, np.repeat(weight / lens, lens)


def _channels_of(cluster: Cluster, p: Placed) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`domain_channels` of every domain of every group (ranks in ring order, a domain's together), at
    once: the channels' nodes, in order; each domain's first channel and count (domains numbered group after
    group, in ring order); and the first domain number of each group (one more at the end: the total)."""
    gpn, nics = cluster.gpus_per_node, _nics(cluster)
    g, n = p.ranks.shape
    table = np.asarray([affine_nics(nics, gpn, i) for i in range(gpn)], dtype=np.int64)  # as many for every GPU
    nic = table[p.ranks % gpn]  # (g, n, per): each member's NICs, in order
    per = table.shape[1]
    # a NIC's first appearance in its group, members in ring order (a node, so its NICs, is in one domain)
    key = (np.arange(g)[:, None, None] * (int(p.nodes.max(initial=0)) + 1) + p.nodes[:, :, None]) * nics + nic
    flat = key.ravel()
    if (flat[1:] >= flat[:-1]).all():  # in order (block placement): a NIC first appears where the key changes
        first = np.flatnonzero(np.concatenate(([True], flat[1:] != flat[:-1])))
    else:
        first = np.unique(flat, return_index=True)[1]
        first.sort()
    row, member = first // (n * per), first // per % n
    seg = np.zeros((g, n), dtype=np.int64)
    seg[:, 1:] = np.cumsum(p.domains[:, 1:] != p.domains[:, :-1], axis=1)
    seg_of_row = np.zeros(g + 1, dtype=np.int64)
    seg_of_row[1:] = np.cumsum(seg[:, -1] + 1)
    domain = seg_of_row[row] + seg[row, member]
    count = np.bincount(domain, minlength=int(seg_of_row[-1]))
    return p.nodes[row, member], np.cumsum(count) - count, count, seg_of_row


def ring_crossing(cluster: Cluster, p: Placed) -> Crossing:
    """Every ring edge between scale-up domains carries one unit, spread over the sending domain's channels
    (:func:`domain_channels`). A domain of one node has its channels on that node: the edge goes from the
    sender's node to the receiver's (the fast path below, the same rule). A member's runs sit in its domain,
    so they add no edge; a group's copies add theirs on the same nodes (counted ``copies`` times)."""
    if _spans_nodes(cluster):
        src, dst, w = _channel_edges(cluster, p, None, 1.0)
        return edge_crossing(fabric_shape(cluster), _nic_node_bytes_s(cluster, p), src, dst, w)
    nodes, domains = p.nodes, p.domains
    keep, times = _kinds(p.copies, nodes, domains)
    if keep is not None:
        nodes, domains = nodes[keep], domains[keep]
    leave = domains != np.roll(domains, -1, axis=1)
    src, dst = nodes[leave], np.roll(nodes, -1, axis=1)[leave]
    each: np.ndarray | float = 1.0 if times is None else np.repeat(times.astype(float), leave.sum(axis=1))
    return edge_crossing(fabric_shape(cluster), _nic_node_bytes_s(cluster, p), src, dst, each)


def _kinds(copies: int, *rows: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
    """:func:`_repeats` of groups that stand for ``copies`` each: the groups kept (None: all) and how often each
    occurs among the copies written out (None: once)."""
    rep = _repeats(*rows)
    keep, times = rep if rep is not None else (None, None)
    if copies > 1:
        times = np.full(len(rows[0]), copies, dtype=np.int64) if times is None else times * copies
    return keep, times


def _repeats(*rows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The groups that come first of their kind (row ``i`` of every array in ``rows`` together) and how often each
    kind occurs; None when every group is distinct, or when the groups are more than they are wide (a pass per
    group would cost more than it saves). Groups on the same nodes in the same order load the fabric alike (the
    DP groups of the tp ranks of one node), so their edges are counted once and weighed by that number: the same
    whole-number loads from a fraction of the edges."""
    n = len(rows[0])
    if n < 2 or n > rows[0].shape[1]:
        return None
    first: dict[bytes, int] = {}
    seen = [first.setdefault(b"".join(a[i].tobytes() for a in rows), i) for i in range(n)]
    if len(first) == n:
        return None
    keep = np.fromiter(first.values(), dtype=np.int64, count=len(first))
    return keep, np.bincount(np.asarray(seen, dtype=np.int64))[keep]


def _leaders(p: Placed) -> np.ndarray:
    """Node of each group's domain leaders (first rank of each domain in ring order), (groups, d)."""
    starts = np.ones_like(p.domains, dtype=bool)
    starts[:, 1:] = p.domains[:, 1:] != p.domains[:, :-1]
    d = int(starts[0].sum())
    rows = p.nodes if (starts.sum(axis=1) == d).all() else p.nodes[:1]  # unequal: the first stands for all
    out: np.ndarray = rows[starts[: len(rows)]].reshape(len(rows), -1)
    return out


def tree_crossing(cluster: Cluster, p: Placed) -> Crossing:
    """Each edge of both trees carries half the data up and half down (NCCL's double binary tree), over
    the domains' channels (:func:`domain_channels`; a domain of one node: its node)."""
    if _spans_nodes(cluster):
        d = len(set(p.domains[0].tolist()))
        both = [(a, b) for c, par in tree_edges(d) for a, b in ((c, par), (par, c))]
        if not both:
            return NONE
        src, dst, w = _channel_edges(cluster, p, both, 0.5)
        return edge_crossing(fabric_shape(cluster), _nic_node_bytes_s(cluster, p), src, dst, w)
    lead = _leaders(p)
    keep, times = _kinds(p.copies, lead)
    if keep is not None:
        lead = lead[keep]
    edges = dtree_edge_array(lead.shape[1])
    if len(edges) == 0:
        return NONE
    c, par = lead[:, edges[:, 0]].ravel(), lead[:, edges[:, 1]].ravel()
    each = None if times is None else np.repeat(times.astype(float), len(edges))
    return both_ways_crossing(fabric_shape(cluster), _nic_node_bytes_s(cluster, p), c, par, 0.5, each)


def p2p_crossing(cluster: Cluster, p: Placed) -> Crossing:
    """Each pair ``[src, dst]`` moves one unit (pipeline hand-offs, nccl-tests sendrecv), ``copies`` units where
    each stands for that many (whole counts: the same numbers as the pairs written out)."""
    src, dst = p.nodes[:, 0], p.nodes[:, -1]
    cross = src != dst
    if not cross.all():  # pipeline pairs all leave their node: no copy then
        src, dst = src[cross], dst[cross]
    return edge_crossing(fabric_shape(cluster), _nic_node_bytes_s(cluster, p, "send_recv"), src, dst,
                         float(p.copies))


def shifts_apply(cluster: Cluster, op: str, groups: np.ndarray, copies: int = 1, runs: int = 1) -> bool:
    """True when ``groups`` (a (groups, n) array of ranks) may stand for the groups written out with ``copies - 1``
    copies of each group and ``runs - 1`` more members after each member, every rank shifted by 1, 2, ... (when TP
    is the fastest dimension: the other TP ranks' groups of a dimension without TP, the other TP ranks of a group
    with TP). One of the two is 1, the other divides a node's GPUs and every rank, so that a shifted rank stays in
    its block of GPUs, on the same node whatever the placement of blocks. Not with degraded parts (their
    penalties read every rank); runs not for send_recv pairs; every other op on scale-up domains of one node (a
    shifted rank stays in its rank's domain, and a domain's channels are its node's). Every load is then a sum of
    whole (or half: a tree's) edge weights, or of an all_to_all's members in whole units of 1 / n, scaled once
    (dragonfly local links too: :mod:`slowlink.topology.crossing`), so the copies' and runs' multiples are the
    written-out groups' numbers: the same Group (:func:`communicator`)."""
    k = copies * runs
    gpn = cluster.gpus_per_node
    return (k > 1 and min(copies, runs) == 1 and not (op == "send_recv" and runs > 1)
            and gpn % k == 0 and not cluster.degraded
            and (op == "send_recv" or max(1, min(cluster.scale_up.domain_gpus, cluster.gpus)) == gpn)
            and not (np.asarray(groups) % k).any())


def pattern_crossing(cluster: Cluster, pattern: str, p: Placed) -> Crossing:
    if pattern == "ring":
        return ring_crossing(cluster, p)
    if pattern == "tree":
        return tree_crossing(cluster, p)
    if pattern == "a2a":
        return all_to_all_crossing(fabric_shape(cluster), _nic_node_bytes_s(cluster, p), p.nodes, p.domains,
                                   p.copies, p.runs)
    return p2p_crossing(cluster, p)


def penalties(cluster: Cluster, op: str, p: Placed) -> tuple[tuple[str, Penalty], ...]:
    """The degraded parts' :class:`Penalty` of each pattern ``op`` may use (empty on a uniform cluster)."""
    if not cluster.degraded:
        return ()
    out = tuple((pat, group_penalty(cluster, pat, p.ranks, p.nodes, p.domains)) for pat in patterns_of(op))
    return tuple(x for x in out if x[1])


def _node_groups(cluster: Cluster, p: Placed, op: str) -> list[set[int]]:
    """Local GPUs, on the first group's first node, of every group that crosses the network from it (the
    first group first; empty if it does not): for send_recv each pair's source. A group's copies and a member's
    runs are there too (:class:`Placed`)."""
    gpn, node = cluster.gpus_per_node, p.nodes[0, 0]
    if op == "send_recv":
        rows = np.nonzero((p.nodes[:, 0] == node) & (p.nodes[:, -1] != node))[0]
        out = [{(int(p.ranks[i, 0]) + j) % gpn} for i in rows for j in range(p.copies)]
    else:
        here = p.nodes == node
        rows = np.nonzero(here.any(axis=1) & (p.nodes != p.nodes[:, :1]).any(axis=1))[0]
        out = [{(int(r) + j + k) % gpn for r in p.ranks[i][here[i]] for k in range(p.runs)}
               for i in rows for j in range(p.copies)]
    return out if len(rows) and rows[0] == 0 else []


def share_of(cluster: Cluster, p: Placed, op: str) -> float | None:
    """NICs' worth of its first node's bandwidth the first group gets (:func:`nic_share`: each group sends
    by the NICs of its GPUs there, each NIC shared by the groups using it); None if it does not leave."""
    node_groups = _node_groups(cluster, p, op)
    return nic_share(_nics(cluster), cluster.gpus_per_node, node_groups) if node_groups else None


def _nics(cluster: Cluster) -> int:
    return max(1, cluster.compute_nics.per_node)


def _nic_node_bytes_s(cluster: Cluster, p: Placed | None = None, op: str = "") -> float:
    """What one node's NICs carry for these groups: the NICs their GPUs reach (:func:`group_nics`) on a
    fat tree or dragonfly, whose leaf uplinks every NIC below the leaf shares; every NIC on rail-optimized,
    where a stage's capacity is a whole rail block and a group on fewer rails gets as much less of it."""
    used = _nics(cluster)
    if p is not None and cluster.fabric.topology != "rail-optimized":
        sets = _node_groups(cluster, p, op)
        if sets:
            used = len(set().union(*(group_nics(used, cluster.gpus_per_node, g) for g in sets)))
    return used * cluster.compute_nics.speed_bytes_s * cluster.fabric.transport.efficiency


def communicator(cluster: Cluster, op: str, groups: Sequence[list[int]] | np.ndarray,
                 node_of_block: list[int] | None = None, copies: int = 1, runs: int = 1) -> Group:
    """The :class:`Group` of ``groups`` (all the communicators that run ``op`` at once, as lists of ranks).

    ranks_per_node is the most members of the first group on one node, span_nodes the nodes it touches,
    groups_per_node the communicators that cross nodes from its first node (they share its NICs). For
    send_recv each group is ``[src, dst]`` and pairs leaving one node spread over its NICs (one pair per
    NIC, like nccl-tests sendrecv). ``copies`` or ``runs`` > 1: ``groups`` stand for the groups written out with
    each group's copies or each member's runs shifted by 1, 2, ... ranks, where :func:`shifts_apply` says they
    stay on its node (the same Group as the groups written out, from a fraction of the ranks). O(total ranks
    given).
    """
    gpn = cluster.gpus_per_node
    if (copies > 1 or runs > 1) and not shifts_apply(cluster, op, np.asarray(groups), copies, runs):
        raise ValueError(f"copies ({copies}) or runs ({runs}) of {op} groups do not stay on their nodes on cluster "
                         f"{cluster.name}")
    p = place(cluster, groups, node_of_block, ring_order=op != "send_recv")
    if copies > 1 or runs > 1:
        p = Placed(p.ranks, p.nodes, p.domains, copies, runs)
    first = p.nodes[0]
    counts = _value_counts(first)[1]
    span, per_node = len(counts), int(counts.max()) * runs
    if op == "send_recv":
        src_node = p.nodes[0, 0]
        crossing_pairs = copies * int(((p.nodes[:, 0] == src_node) & (p.nodes[:, 1] != p.nodes[:, 0])).sum()) \
            if span > 1 else 0
        sharing = max(1, -(-crossing_pairs // max(1, cluster.compute_nics.per_node)))
        grp_rpn, grp_share = (1, sharing) if span > 1 else (2, 1)
        return Group(2, grp_rpn, grp_share, span, (("p2p", p2p_crossing(cluster, p)),), penalties(cluster, op, p),
                     share_of(cluster, p, op))
    size = p.ranks.shape[1] * runs  # the first group's (place keeps the groups of its size)
    if span == 1:
        return Group(size, per_node, 1, 1, (), penalties(cluster, op, p))
    multi = (p.nodes != p.nodes[:, :1]).any(axis=1)
    sharing = copies * int(((p.nodes == first[0]).any(axis=1) & multi).sum())
    cross = tuple((pat, pattern_crossing(cluster, pat, p)) for pat in patterns_of(op))
    return Group(size, per_node, max(1, min(sharing, gpn // per_node)), span, cross,
                 penalties(cluster, op, p), share_of(cluster, p, op), busiest_domain(cluster, p))


def _value_counts(row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(row, return_counts=True)``; one pass instead of a sort when ``row`` is already sorted (a
    group in ring order on block placement: 131,072 ranks in ~0.3 ms instead of ~5)."""
    if row.size and bool((row[1:] >= row[:-1]).all()):
        starts = np.flatnonzero(np.concatenate(([True], row[1:] != row[:-1])))
        return row[starts], np.diff(np.append(starts, row.size))
    return np.unique(row, return_counts=True)


def busiest_domain(cluster: Cluster, p: Placed) -> tuple[int, int, int, int]:
    """The first group's busiest scale-up domain: (its members there, the nodes they sit on), the domains
    the group spans (like ``ranks_per_node``: the most members on one node), and that domain's network
    channels (:func:`domain_channels`: the NICs affine to its members there)."""
    doms, counts = _value_counts(p.domains[0])
    here = p.domains[0] == doms[int(np.argmax(counts))]
    ranks, nodes = p.ranks[0][here], p.nodes[0][here]
    if p.runs > 1:  # each member and its runs, in ring order
        ranks, nodes = (ranks[:, None] + np.arange(p.runs)).ravel(), np.repeat(nodes, p.runs)
    chans = domain_channels(ranks.tolist(), nodes.tolist(), cluster.gpus_per_node, _nics(cluster))
    return int(counts.max()) * p.runs, len(set(nodes.tolist())), len(doms), len(chans)


def block_groups(cluster: Cluster, group: Group) -> list[list[int]]:
    """The concurrent groups a hand-made :class:`Group` describes, in rank space: ``groups_per_node``
    communicators side by side, each with ``ranks_per_node`` consecutive GPUs on each of its nodes."""
    gpn, rpn = cluster.gpus_per_node, group.ranks_per_node
    nodes = -(-group.ranks // rpn)
    out = []
    for j in range(max(1, group.groups_per_node)):
        ranks = [k * gpn + j * rpn + i for k in range(nodes) for i in range(rpn)][:group.ranks]
        out.append(ranks)
    return out


_CACHE: dict[tuple[str, str, int, int, int], Group] = {}


def with_crossing(cluster: Cluster, op: str, group: Group) -> Group:
    """``group`` with its crossings: as given, or from :func:`block_groups` (cached by the cluster's value and
    the group's shape)."""
    if group.crossing is not None:
        return group
    key = (cluster.key, op, group.ranks, group.ranks_per_node, group.groups_per_node)
    hit = _CACHE.get(key)
    if hit is None:
        if len(_CACHE) > 4096:
            _CACHE.clear()
        gpn = cluster.gpus_per_node
        pair = [[0, gpn if group.ranks_per_node == 1 and cluster.nodes > 1 else 1]]
        groups = pair if op == "send_recv" else block_groups(cluster, group)
        placed = place(cluster, groups, ring_order=op != "send_recv")
        # the first group leaves its node (not np.unique: in numpy 2 it imports numpy.ma, ~30 ms of start-up)
        cross = tuple((pat, pattern_crossing(cluster, pat, placed)) for pat in patterns_of(op)) \
            if (placed.nodes[0] != placed.nodes[0, 0]).any() else ()
        if op == "send_recv":  # groups_per_node pairs side by side, from consecutive GPUs of one node
            k = max(1, min(group.groups_per_node, gpn))
            spans = cluster.nodes > 1 and group.ranks > group.ranks_per_node  # priced across nodes
            shared = place(cluster, [[j, gpn + j] for j in range(k)], ring_order=False) if spans else placed
        else:
            shared = placed
        hit = Group(group.ranks, group.ranks_per_node, group.groups_per_node, group.span_nodes,
                    cross, penalties(cluster, op, placed), share_of(cluster, shared, op))
        _CACHE[key] = hit
    return hit
