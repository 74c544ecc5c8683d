"""Fat trees with 1 to 3 tiers (leaf, spine/aggregation, core) and the rail-optimized variant, as a graph.

Sizing comes from :func:`slowlink.topology.shape.fabric_shape` (the rule the analytical model and the
emulator use too): ``nodes_per_leaf`` nodes per leaf (a node's NICs never straddle two), ``A`` uplinks per
leaf, each of ``leaf_uplink_bytes_s``. Rail-optimized: NIC ``i`` of every node of a block of
``nodes_per_leaf`` nodes goes to that block's rail-``i`` leaf, then spines. Three tiers: ``P`` leaves form
a pod; each pod has ``A`` aggregation switches, agg ``j`` of every pod reaches core group ``j`` of ``C``
cores, each agg -> core cable of ``pod_uplink_bytes_s``.

Routing picks the spine (2 tiers) or the aggregation index ``j`` and core ``c`` (3 tiers), the same index
up and down as in a folded Clos:
  * ``ecmp``: from the flow's hash (Ethernet / RoCE: per-flow 5-tuple hashing, collisions included);
  * ``dmodk``: from the destination NIC, ``j = dst mod A``, ``c = (dst div A) mod C``: destination-mod-k
    routing as InfiniBand subnet managers program it (OpenSM's ftree / UFM; Zahavi et al., "Optimized
    InfiniBand fat-tree routing for shift all-to-all communication patterns", 2010): deterministic, and
    free of contention for the shift permutations rings and trees use on a block placement;
  * ``adaptive``: ideal spraying: a flow splits evenly over every
equal-cost path; the graph then holds one *trunk* per switch and direction (capacity = sum of the parallel
links), which is exact for even splitting over links of equal capacity (each parallel link carries
1/k of every flow, so the k constraints are the trunk's one). Switch vertices: ``leaf:<l>``,
``spine:<s>`` / ``agg:<pod>:<j>``, ``core:<j>:<c>``; trunks ``spines``, ``aggs:<pod>``, ``cores``.
Complexity: O(leaves x A + aggs x C) links.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from slowlink.spec.cluster import Cluster
from slowlink.topology.fabric import Paths, Topology
from slowlink.topology.shape import FabricShape, fabric_shape


def _leaf_of(cluster: Cluster, shape: FabricShape, n_endpoints: int) -> list[int]:
    """Leaf of every endpoint: compute NICs by the shape's rule, then storage targets on leaves of their own."""
    nics = shape.nics_per_node
    n_compute = cluster.nodes * nics
    if cluster.fabric.topology == "single-switch" or cluster.fabric.tiers == 1:
        return [0] * n_endpoints
    rails = cluster.fabric.topology == "rail-optimized"
    leaf = []
    for e in range(n_compute):
        node, i = divmod(e, nics)
        block = shape.leaf_of_node(node)
        leaf.append(block * nics + i if rails else block)
    base = max(leaf) + 1 if leaf else 0
    leaf += [base + j // shape.endpoints_per_leaf for j in range(n_endpoints - n_compute)]
    return leaf


def build_fat_tree(topo: Topology, cluster: Cluster, endpoints: list[str], caps: list[float]) -> None:
    """Add the leaves, spines / aggregation / core switches and the router to ``topo``."""
    f = cluster.fabric
    sw = f.switch_latency_s
    shape = fabric_shape(cluster)
    leaf_of = _leaf_of(cluster, shape, len(endpoints))
    lat = f.transport.latency_s / 2 + sw
    ids = topo.add_links(endpoints, [f"leaf:{leaf_of[e]}" for e in range(len(endpoints))], caps,
                         [lat] * len(endpoints))
    topo.nic_up.extend(up for up, _ in ids)
    topo.nic_down.extend(down for _, down in ids)
    n_leaves = max(leaf_of) + 1
    if n_leaves == 1:
        topo.route = lambda a, b, h: [(1.0, (topo.nic_up[a], topo.nic_down[b]))]
        nu_a, nd_a = np.asarray(topo.nic_up, dtype=np.int64), np.asarray(topo.nic_down, dtype=np.int64)
        topo.route_array = lambda a, b, h: np.stack((nu_a[a], nd_a[b]), axis=1)
        return
    if f.tiers < 3 or n_leaves <= shape.leaves_per_pod:
        _two_tier(topo, shape, n_leaves, leaf_of, sw, f.routing)
    else:
        _three_tier(topo, shape, n_leaves, leaf_of, sw, f.routing)


def _two_tier(topo: Topology, shape: FabricShape, n_leaves: int, leaf_of: list[int], sw: float,
              routing: str) -> None:
    nu, nd = topo.nic_up, topo.nic_down
    up = shape.uplinks_per_leaf
    if topo.adaptive:
        tr = [topo.add_link(f"leaf:{lf}", "spines", up * shape.leaf_uplink_bytes_s, sw) for lf in range(n_leaves)]

        def route(a: int, b: int, h: int) -> Paths:
            la, lb = leaf_of[a], leaf_of[b]
            if la == lb:
                return [(1.0, (nu[a], nd[b]))]
            return [(1.0, (nu[a], tr[la][0], tr[lb][1], nd[b]))]

        trunk = np.asarray(tr, dtype=np.int64).reshape(n_leaves, 1, 2)
        pick = _pick_trunk
    else:
        ls = [[topo.add_link(f"leaf:{lf}", f"spine:{s}", shape.leaf_uplink_bytes_s, sw) for s in range(up)]
              for lf in range(n_leaves)]
        dmodk = routing == "dmodk"

        def route(a: int, b: int, h: int) -> Paths:
            la, lb = leaf_of[a], leaf_of[b]
            if la == lb:
                return [(1.0, (nu[a], nd[b]))]
            s = (b if dmodk else h) % up
            return [(1.0, (nu[a], ls[la][s][0], ls[lb][s][1], nd[b]))]

        trunk = np.asarray(ls, dtype=np.int64).reshape(n_leaves, up, 2)
        pick = _pick_dmodk if dmodk else _pick_hash
    topo.route = route
    leaf, nu_a, nd_a = (np.asarray(x, dtype=np.int64) for x in (leaf_of, nu, nd))

    def route_array(a: np.ndarray, b: np.ndarray, h: np.ndarray) -> np.ndarray:
        la, lb = leaf[a], leaf[b]
        s = pick(b, h, trunk.shape[1])
        out = np.stack((nu_a[a], trunk[la, s, 0], trunk[lb, s, 1], nd_a[b]), axis=1)
        same = la == lb
        out[same, 1], out[same, 2], out[same, 3] = nd_a[b[same]], -1, -1
        return out

    topo.route_array = route_array


def _pick_hash(b: np.ndarray, h: np.ndarray, k: int) -> np.ndarray:
    """The uplink of a hashed flow: ``h mod k`` (:func:`~slowlink.topology.fabric.mix` values)."""
    return (h % np.uint64(k)).astype(np.int64)


def _pick_dmodk(b: np.ndarray, h: np.ndarray, k: int) -> np.ndarray:
    return b % k


def _pick_trunk(b: np.ndarray, h: np.ndarray, k: int) -> np.ndarray:
    return np.zeros(b.shape, dtype=np.int64)


def _three_tier(topo: Topology, shape: FabricShape, n_leaves: int, leaf_of: list[int], sw: float,
                routing: str) -> None:
    nu, nd = topo.nic_up, topo.nic_down
    pods = -(-n_leaves // shape.leaves_per_pod)
    pod = [lf // shape.leaves_per_pod for lf in range(n_leaves)]
    a_n, c_n = shape.uplinks_per_leaf, shape.cores_per_group
    if topo.adaptive:
        la_t = [topo.add_link(f"leaf:{lf}", f"aggs:{pod[lf]}", a_n * shape.leaf_uplink_bytes_s, sw)
                for lf in range(n_leaves)]
        pc_t = [topo.add_link(f"aggs:{p}", "cores", a_n * c_n * shape.pod_uplink_bytes_s, sw) for p in range(pods)]

        def route(a: int, b: int, h: int) -> Paths:
            la, lb = leaf_of[a], leaf_of[b]
            if la == lb:
                return [(1.0, (nu[a], nd[b]))]
            if pod[la] == pod[lb]:
                return [(1.0, (nu[a], la_t[la][0], la_t[lb][1], nd[b]))]
            return [(1.0, (nu[a], la_t[la][0], pc_t[pod[la]][0], pc_t[pod[lb]][1], la_t[lb][1], nd[b]))]
    else:
        la_l = [[topo.add_link(f"leaf:{lf}", f"agg:{pod[lf]}:{j}", shape.leaf_uplink_bytes_s, sw)
                 for j in range(a_n)] for lf in range(n_leaves)]
        ac_l = [[[topo.add_link(f"agg:{p}:{j}", f"core:{j}:{c}", shape.pod_uplink_bytes_s, sw) for c in range(c_n)]
                 for j in range(a_n)] for p in range(pods)]
        dmodk = routing == "dmodk"

        def route(a: int, b: int, h: int) -> Paths:
            la, lb = leaf_of[a], leaf_of[b]
            if la == lb:
                return [(1.0, (nu[a], nd[b]))]
            key = b if dmodk else h
            j = key % a_n
            if pod[la] == pod[lb]:
                return [(1.0, (nu[a], la_l[la][j][0], la_l[lb][j][1], nd[b]))]
            c = (key // a_n) % c_n
            return [(1.0, (nu[a], la_l[la][j][0], ac_l[pod[la]][j][c][0], ac_l[pod[lb]][j][c][1],
                           la_l[lb][j][1], nd[b]))]
    topo.route = route
    tables = (np.asarray(la_t), np.asarray(pc_t)) if topo.adaptive else (np.asarray(la_l), np.asarray(ac_l))
    topo.route_array = _three_tier_array(topo, leaf_of, pod, *tables, routing == "dmodk")


def _three_tier_array(topo: Topology, leaf_of: list[int], pod: list[int], la: np.ndarray, pc: np.ndarray,
                      dmodk: bool) -> Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """``route`` of :func:`_three_tier` over arrays: leaf -> aggregation ``j`` -> core ``c`` (trunks when
    adaptive: one aggregation trunk per leaf, one core trunk per pod)."""
    leaf, pod_a = np.asarray(leaf_of, dtype=np.int64), np.asarray(pod, dtype=np.int64)
    nu_a, nd_a = np.asarray(topo.nic_up, dtype=np.int64), np.asarray(topo.nic_down, dtype=np.int64)
    adaptive = topo.adaptive
    up = np.asarray(la, dtype=np.int64).reshape(len(la), -1, 2)  # (leaves, A or 1, 2)
    core = np.asarray(pc, dtype=np.int64).reshape(len(pc), up.shape[1] if not adaptive else 1, -1, 2)
    a_n, c_n = up.shape[1], core.shape[2]

    def route_array(a: np.ndarray, b: np.ndarray, h: np.ndarray) -> np.ndarray:
        la_, lb_ = leaf[a], leaf[b]
        if adaptive:
            j = c = np.zeros(a.shape, dtype=np.int64)
        elif dmodk:
            j, c = b % a_n, (b // a_n) % c_n
        else:
            j = (h % np.uint64(a_n)).astype(np.int64)
            c = ((h // np.uint64(a_n)) % np.uint64(c_n)).astype(np.int64)
        pa, pb = pod_a[la_], pod_a[lb_]
        out = np.stack((nu_a[a], up[la_, j, 0], core[pa, j, c, 0], core[pb, j, c, 1], up[lb_, j, 1], nd_a[b]),
                       axis=1)
        same_pod = pa == pb
        out[same_pod, 2], out[same_pod, 3] = out[same_pod, 4], nd_a[b[same_pod]]
        out[same_pod, 4:] = -1
        same = la_ == lb_
        out[same, 1], out[same, 2:] = nd_a[b[same]], -1
        return out

    return route_array
