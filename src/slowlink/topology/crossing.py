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


NONE = Crossing()


def _worst(shape: FabricShape, t_nic: float, loads: list[float]) -> Crossing:
    """The stage whose time (load / capacity) exceeds the NICs' by the most, or NONE."""
    best = NONE
    for i, (st, t) in enumerate(zip(shape.stages, loads, strict=True)):
        f = t / t_nic
        if f > best.factor * (1 + 1e-9):
            best = Crossing(f, i, st.name, st.ratio)
    return best


def _stage_time(st: Stage, src: np.ndarray, dst: np.ndarray, w: np.ndarray) -> float:
    ds, dd = src // st.nodes_per_domain, dst // st.nodes_per_domain
    cross = ds != dd
    if not cross.any():
        return 0.0
    ds, dd, wc = ds[cross], dd[cross], w[cross]
    t = max(np.bincount(ds, wc).max(), np.bincount(dd, wc).max()) / st.uplink_bytes_s
    if st.pair_bytes_s is not None:
        n_dom = int(max(ds.max(), dd.max())) + 1
        t = max(t, np.bincount(ds * n_dom + dd, wc).max() / st.pair_bytes_s)
    return float(t)


def edge_crossing(shape: FabricShape, nic_node_bytes_s: float, src_node: np.ndarray, dst_node: np.ndarray,
                  weight: np.ndarray) -> Crossing:
    """Crossing of node-to-node traffic: ``weight[k]`` units from ``src_node[k]`` to ``dst_node[k]``.

    ``nic_node_bytes_s`` is what one node's NICs carry (the analytical model's NIC bandwidth per node).
    Cost: O(edges) per stage.
    """
    if not shape.stages or len(src_node) == 0:
        return NONE
    w = np.asarray(weight, dtype=float)
    node_t = max(np.bincount(src_node, w).max(), np.bincount(dst_node, w).max()) / nic_node_bytes_s
    if node_t <= 0:
        return NONE
    return _worst(shape, node_t, [_stage_time(st, src_node, dst_node, w) for st in shape.stages])


def _member_counts(keys: np.ndarray) -> np.ndarray:
    """For a (groups, n) array of domain keys: how many members of its own group share each member's key."""
    g, n = keys.shape
    flat = keys.astype(np.int64) + (np.arange(g, dtype=np.int64)[:, None] * (int(keys.max()) + 1))
    _, inv, counts = np.unique(flat.ravel(), return_inverse=True, return_counts=True)
    out: np.ndarray = counts[inv].reshape(g, n)
    return out


def all_to_all_crossing(shape: FabricShape, nic_node_bytes_s: float, nodes: np.ndarray,
                        scale_up: np.ndarray) -> Crossing:
    """Crossing of an all_to_all in every group at once: member ``i`` of a group of ``n`` sends 1/n of its
    buffer to each member. ``nodes`` and ``scale_up`` are (groups, n) arrays of each member's physical node
    and scale-up domain. A member's NIC carries (n - m_s) / n (m_s: members in its scale-up domain, reached
    over NVLink); a stage domain holding m_D members sends m_D (n - m_D) / n out. O(groups x n).
    """
    if not shape.stages:
        return NONE
    n = nodes.shape[1]
    per_member = (n - _member_counts(scale_up)) / n
    node_t = np.bincount(nodes.ravel(), per_member.ravel()).max() / nic_node_bytes_s
    if node_t <= 0:
        return NONE
    loads = []
    for st in shape.stages:
        dom = nodes // st.nodes_per_domain
        out = (n - _member_counts(dom)) / n
        t = float(np.bincount(dom.ravel(), out.ravel()).max()) / st.uplink_bytes_s
        if st.pair_bytes_s is not None:
            n_dom = int(dom.max()) + 1
            counts = np.zeros((nodes.shape[0], n_dom))
            np.add.at(counts, (np.repeat(np.arange(nodes.shape[0]), n), dom.ravel()), 1.0)
            pair = counts.T @ counts / n
            np.fill_diagonal(pair, 0.0)
            t = max(t, float(pair.max()) / st.pair_bytes_s)
        loads.append(t)
    return _worst(shape, node_t, loads)
