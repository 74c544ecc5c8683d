"""Fat trees with 1 to 3 tiers (leaf, spine/aggregation, core) and the rail-optimized variant.

Sizing from the spec: a leaf has ``d0 = radix * o0 / (1 + o0)`` down ports (``nics_per_leaf`` overrides)
and ``A = d0 / o0`` uplinks (``spines`` overrides), each of ``d0 * line / o0 / A``. Fat tree: a node's
NICs fill consecutive leaf ports. Rail-optimized: NIC ``i`` of every node of a block of ``d0`` nodes goes
to that block's rail-``i`` leaf (one rail switch per GPU index), then spines. Three tiers: ``P`` leaves
form a pod (``pod_gpus`` when given, else the aggregation switch's down ports ``radix * o1 / (1 + o1)``);
each pod has ``A`` aggregation switches, agg ``j`` of every pod reaches core group ``j`` of ``C`` cores;
the pod's uplinks carry its downlink capacity / ``o_pod`` with ``o_pod = max(o1, o2)`` (tier 2's ratio is
the pod boundary in the spec; the graph has one uplink stage above the pod, so both ratios sit there,
as the analytical model charges the worst tier crossed).

Routing: ECMP picks the spine (2 tiers) or the aggregation index and core (3 tiers) from the flow's hash
(same index up and down, as in a folded Clos). Adaptive = ideal spraying: a flow splits evenly over every
equal-cost path; the graph then holds one *trunk* per switch and direction (capacity = sum of the parallel
links), which is exact for even splitting over links of equal capacity (each parallel link carries
1/k of every flow, so the k constraints are the trunk's one). Switch vertices: ``leaf:<l>``,
``spine:<s>`` / ``agg:<pod>:<j>``, ``core:<j>:<c>``; trunks ``spines``, ``aggs:<pod>``, ``cores``.
Complexity: O(leaves x A + aggs x C) links.
"""

from __future__ import annotations

from dataclasses import dataclass

from slowlink.spec.cluster import Cluster
from slowlink.topology.fabric import Paths, Topology


@dataclass(frozen=True)
class _Shape:
    down: int          # endpoints per leaf
    up: int            # parallel uplinks of a leaf (spines or aggs per pod)
    leaf_up_bytes_s: float
    pod_leaves: int    # leaves per pod (3 tiers)
    cores: int         # cores per core group (3 tiers)
    pod_up_bytes_s: float  # one agg -> core link


def _shape(cluster: Cluster, nics_per_leaf: int | None, spines: int | None) -> _Shape:
    f = cluster.fabric
    o = f.oversubscription
    r = f.switch_radix
    line = cluster.compute_nics.speed_bytes_s
    down = nics_per_leaf or max(1, int(r * o[0] / (1 + o[0])))
    up = spines or max(1, round(down / o[0]))
    leaf_up = down * line / o[0] / up
    if f.tiers < 3:
        return _Shape(down, up, leaf_up, 0, 0, 0.0)
    o_pod = max(o[1:]) if len(o) > 1 else 1.0
    if f.pod_gpus is not None:
        per_leaf_gpus = down * cluster.gpus_per_node / max(1, cluster.compute_nics.per_node)
        pod_leaves = max(1, round(f.pod_gpus / per_leaf_gpus))
    else:
        pod_leaves = max(1, int(r * o_pod / (1 + o_pod)))
    cores = max(1, round(pod_leaves / o_pod))
    return _Shape(down, up, leaf_up, pod_leaves, cores, pod_leaves * leaf_up / o_pod / cores)


def _leaf_of(cluster: Cluster, topo: Topology, n_endpoints: int, down: int) -> list[int]:
    nics = topo.nics_per_node
    n_compute = cluster.nodes * nics
    single = cluster.fabric.topology == "single-switch" or cluster.fabric.tiers == 1
    if single:
        return [0] * n_endpoints
    leaf = []
    for e in range(n_compute):
        node, i = divmod(e, nics)
        leaf.append((node // down) * nics + i if cluster.fabric.topology == "rail-optimized" else e // down)
    base = max(leaf) + 1 if leaf else 0
    leaf += [base + j // down for j in range(n_endpoints - n_compute)]
    return leaf


def build_fat_tree(topo: Topology, cluster: Cluster, endpoints: list[str], caps: list[float],
                   nics_per_leaf: int | None = None, spines: int | None = None) -> None:
    """Add the leaves, spines / aggregation / core switches and the router to ``topo``."""
    f = cluster.fabric
    sw = f.switch_latency_s
    shape = _shape(cluster, nics_per_leaf, spines)
    leaf_of = _leaf_of(cluster, topo, len(endpoints), shape.down)
    for e, name in enumerate(endpoints):
        up, down = topo.add_link(name, f"leaf:{leaf_of[e]}", caps[e], f.transport.latency_s / 2 + sw)
        topo.nic_up.append(up)
        topo.nic_down.append(down)
    n_leaves = max(leaf_of) + 1
    if n_leaves == 1:
        topo.route = lambda a, b, h: [(1.0, (topo.nic_up[a], topo.nic_down[b]))]
        return
    if f.tiers < 3 or n_leaves <= shape.pod_leaves:
        _two_tier(topo, shape, n_leaves, leaf_of, sw)
    else:
        _three_tier(topo, shape, n_leaves, leaf_of, sw)


def _two_tier(topo: Topology, shape: _Shape, n_leaves: int, leaf_of: list[int], sw: float) -> None:
    nu, nd = topo.nic_up, topo.nic_down
    if topo.adaptive:
        tr = [topo.add_link(f"leaf:{lf}", "spines", shape.up * shape.leaf_up_bytes_s, sw) for lf in range(n_leaves)]

        def route(a: int, b: int, h: int) -> Paths:
            la, lb = leaf_of[a], leaf_of[b]
            if la == lb:
                return [(1.0, (nu[a], nd[b]))]
            return [(1.0, (nu[a], tr[la][0], tr[lb][1], nd[b]))]
    else:
        ls = [[topo.add_link(f"leaf:{lf}", f"spine:{s}", shape.leaf_up_bytes_s, sw) for s in range(shape.up)]
              for lf in range(n_leaves)]

        def route(a: int, b: int, h: int) -> Paths:
            la, lb = leaf_of[a], leaf_of[b]
            if la == lb:
                return [(1.0, (nu[a], nd[b]))]
            s = h % shape.up
            return [(1.0, (nu[a], ls[la][s][0], ls[lb][s][1], nd[b]))]
    topo.route = route


def _three_tier(topo: Topology, shape: _Shape, n_leaves: int, leaf_of: list[int], sw: float) -> None:
    nu, nd = topo.nic_up, topo.nic_down
    pods = -(-n_leaves // shape.pod_leaves)
    pod = [lf // shape.pod_leaves for lf in range(n_leaves)]
    a_n, c_n = shape.up, shape.cores
    if topo.adaptive:
        la_t = [topo.add_link(f"leaf:{lf}", f"aggs:{pod[lf]}", a_n * shape.leaf_up_bytes_s, sw)
                for lf in range(n_leaves)]
        pc_t = [topo.add_link(f"aggs:{p}", "cores", a_n * c_n * shape.pod_up_bytes_s, sw) for p in range(pods)]

        def route(a: int, b: int, h: int) -> Paths:
            la, lb = leaf_of[a], leaf_of[b]
            if la == lb:
                return [(1.0, (nu[a], nd[b]))]
            if pod[la] == pod[lb]:
                return [(1.0, (nu[a], la_t[la][0], la_t[lb][1], nd[b]))]
            return [(1.0, (nu[a], la_t[la][0], pc_t[pod[la]][0], pc_t[pod[lb]][1], la_t[lb][1], nd[b]))]
    else:
        la_l = [[topo.add_link(f"leaf:{lf}", f"agg:{pod[lf]}:{j}", shape.leaf_up_bytes_s, sw) for j in range(a_n)]
                for lf in range(n_leaves)]
        ac_l = [[[topo.add_link(f"agg:{p}:{j}", f"core:{j}:{c}", shape.pod_up_bytes_s, sw) for c in range(c_n)]
                 for j in range(a_n)] for p in range(pods)]

        def route(a: int, b: int, h: int) -> Paths:
            la, lb = leaf_of[a], leaf_of[b]
            if la == lb:
                return [(1.0, (nu[a], nd[b]))]
            j = h % a_n
            if pod[la] == pod[lb]:
                return [(1.0, (nu[a], la_l[la][j][0], la_l[lb][j][1], nd[b]))]
            c = (h // a_n) % c_n
            return [(1.0, (nu[a], la_l[la][j][0], ac_l[pod[la]][j][c][0], ac_l[pod[lb]][j][c][1],
                           la_l[lb][j][1], nd[b]))]
    topo.route = route
