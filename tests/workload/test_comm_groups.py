"""A layout's communicators as :class:`~slowlink.workload.comm.Groups`: the groups of a layout with its fastest
dimension (of more than one rank) factored out, given as shifted copies (dimensions that do not run along it) or
with runs after each member (those that do), and priced from those alone, on a node's GPUs, to the same Group."""

from __future__ import annotations

import itertools
import pickle
from dataclasses import astuple
from typing import Any

import numpy as np
import pytest

from slowlink.collectives.communicator import communicator, shifts_apply
from slowlink.spec.cluster import Cluster, cluster_from_mapping
from slowlink.spec.workload import Parallel
from slowlink.workload.comm import group_shape, groups_of
from slowlink.workload.placement import dimension_groups

ORDERS = ("tp-cp-dp-pp", "tp-cp-pp-dp", "tp-pp-dp-cp", "dp-tp-cp-pp", "cp-tp-dp-pp", "pp-tp-cp-dp")
LAYOUTS = [Parallel.of(tp=tp, cp=cp, dp=dp, pp=pp, order=order)
           for tp, cp, dp, pp, order in itertools.product((1, 2, 4), (1, 2), (2, 4), (2, 4), ORDERS)]
WITH_EP = [Parallel.of(tp=2, cp=1, dp=8, pp=2, ep=4), Parallel.of(tp=4, cp=2, dp=4, pp=1, ep=2, order="tp-dp-cp-pp"),
           Parallel.of(tp=1, cp=2, dp=8, pp=2, ep=4), Parallel.of(tp=1, cp=1, dp=8, pp=1, ep=2),
           Parallel.of(tp=2, cp=2, dp=4, pp=2, ep=2, order="dp-cp-tp-pp")]
RUN_ALONG = {"tp": {"tp"}, "cp": {"cp"}, "dp": {"dp"}, "pp": {"pp"}, "dp_cp": {"dp", "cp"}, "tp_cp": {"tp", "cp"},
             "tp_pp": {"tp", "pp"}, "tp_cp_dp": {"tp", "cp", "dp"}, "world": {"tp", "cp", "dp", "pp"}, "ep": {"dp"}}


def _ids(p: Parallel) -> str:
    return f"tp{p.tp}cp{p.cp}dp{p.dp}pp{p.pp}ep{p.ep}-{p.order}"


def _fastest(p: Parallel) -> tuple[str, int]:
    """The fastest-varying dimension of more than one rank and the ranks factored out of it (ep of a DP one)."""
    size = {"tp": p.tp, "cp": p.cp, "dp": p.dp, "pp": p.pp}
    x = next(d for d in p.order.split("-") if size[d] > 1)
    return x, p.ep if x == "dp" and p.ep > 1 else size[x]


def _pairs_by_hand(p: Parallel, dim: str) -> list[list[int]]:
    """The pairs written out from the groups, one group after another (pp: each stage to the next; cp: each ring
    position to the next, around)."""
    if dim == "pp_pairs":
        return [[g[i], g[i + 1]] for g in dimension_groups(p, "pp") for i in range(len(g) - 1)]
    return [[g[i], g[(i + 1) % len(g)]] for g in dimension_groups(p, "cp") for i in range(len(g))]


def _edp_by_hand(p: Parallel) -> list[list[int]]:
    return [g[k::p.ep] for g in dimension_groups(p, "dp") for k in range(p.ep)]


def _by_hand(p: Parallel, dim: str) -> list[list[int]]:
    if dim in ("pp_pairs", "cp_pairs"):
        return _pairs_by_hand(p, dim)
    return _edp_by_hand(p) if dim == "edp" else dimension_groups(p, dim)  # type: ignore[arg-type]


@pytest.mark.parametrize("p", [*LAYOUTS, *WITH_EP], ids=_ids)
@pytest.mark.parametrize("dim", ["pp_pairs", "cp_pairs", "dp", "cp", "dp_cp", "pp", "ep", "edp", "tp", "tp_cp",
                                 "tp_pp", "tp_cp_dp", "world"])
def test_groups_are_a_smaller_layouts_times_f_with_copies_or_runs(p: Parallel, dim: str) -> None:
    g = groups_of(p, dim)
    full = _by_hand(p, dim)
    assert g.lists() == full and len(g) == len(full)  # whatever the form, the groups written out
    x, f = _fastest(p)
    if (x, dim) in (("pp", "pp_pairs"), ("cp", "cp_pairs")) or (x == "dp" and p.ep == 1 and dim in ("ep", "edp")):
        assert g.base is None and (g.copies, g.runs) == (1, 1)  # pairs along the fastest dimension: as they are
        return
    assert g.base is not None and not (g.base % f).any()
    built = np.asarray(full)
    if x in RUN_ALONG.get(dim, set()):  # every member followed by the next f - 1 ranks
        assert (g.copies, g.runs) == (1, f) and g.shape == (g.base.shape[0], g.base.shape[1] * f)
        assert np.array_equal((g.base[:, :, None] + np.arange(f)).reshape(g.shape), built)
        assert [g[0], g[-1], g[:2]] == [full[0], full[-1], full[:2]]
    else:  # f copies of each group, shifted by 0 .. f - 1, written after one another as they come
        assert (g.copies, g.runs) == (f, 1) and g.shape == (g.base.shape[0] * f, g.base.shape[1])
        copies = {tuple(r) for r in (g.base[None, :, :] + np.arange(f)[:, None, None]).reshape(-1, g.shape[1])}
        assert copies == {tuple(r) for r in built} and len(built) == len(copies) * 1


@pytest.mark.parametrize("p", [*LAYOUTS, *WITH_EP], ids=_ids)
@pytest.mark.parametrize("unit", [1, 2, 3, 4, 8])
def test_within_a_node_the_shifts_are_the_gcd_and_stand_for_the_same_groups(p: Parallel, unit: int) -> None:
    for dim in ("pp_pairs", "dp", "edp", "tp", "world"):
        g = groups_of(p, dim)
        shifted = g.within(unit)
        if g.base is None or g.copies * g.runs == 1 or len(g) == 0:
            assert shifted is None or len(g) == 0
            continue
        k = g.copies * g.runs
        step = np.gcd(k, unit)
        if step == 1:
            assert shifted is None
            continue
        assert shifted is not None
        base, copies, runs = shifted
        assert copies * runs == step and not (base % step).any() and (copies == 1) == (g.copies == 1)
        assert base[0].tolist() == (g[0][::step] if runs > 1 else g[0])  # the first group first
        if runs > 1:
            written = (base[:, :, None] + np.arange(runs)).reshape(len(base), -1)
        else:
            written = (base[None, :, :] + np.arange(copies)[:, None, None]).reshape(-1, base.shape[1])
        assert sorted(map(tuple, written.tolist())) == sorted(map(tuple, g.lists()))


def _cluster(gpn: int, placement: dict[str, Any] | None = None, **fabric: Any) -> Cluster:
    return cluster_from_mapping({
        "name": f"copies-{gpn}-{sorted(fabric.items())}-{placement}", "nodes": 32 // gpn, "gpus_per_node": gpn,
        "gpu": "h100-sxm", "scale_up": {"link": "nvlink4", "domain_gpus": gpn},
        "nics": {"compute": {"per_node": 2, "speed_gbit_s": 400}},
        "fabric": {"transport": "infiniband", "tiers": 2, **fabric}, **({"placement": placement} if placement else {})})


CLUSTERS: dict[str, dict[str, Any]] = {
    "fat2-4to1": {"switch_radix": 10, "oversubscription": 4},
    "rail2": {"topology": "rail-optimized", "switch_radix": 8},
    "fat3": {"switch_radix": 4, "tiers": 3, "oversubscription": [1, 1, 2]},
    "dragonfly": {"topology": "dragonfly", "switch_radix": 4, "dragonfly": {"groups": 4}},
    # blocks of ranks on nodes in a shuffled order: a shifted rank stays on its block's node all the same
    "fat2-fragmented": {"switch_radix": 10, "oversubscription": 4, "placement": {"mode": "fragmented", "seed": 3}},
    "fat3-reversed": {"switch_radix": 4, "tiers": 3, "oversubscription": [1, 1, 2],
                      "placement": {"mode": "custom", "node_order": "reversed"}},
}


PRICED = [("pp_pairs", "send_recv"), ("cp_pairs", "send_recv"), ("dp", "all_reduce"), ("dp", "reduce_scatter"),
          ("dp_cp", "all_reduce"), ("cp", "all_gather"), ("pp", "all_reduce"), ("edp", "all_gather"),
          ("tp", "all_gather"), ("tp_cp", "all_reduce"), ("tp_pp", "all_reduce"), ("tp_cp_dp", "reduce_scatter"),
          ("world", "all_reduce"), ("ep", "all_to_all"), ("tp", "all_to_all")]


@pytest.mark.parametrize("name", sorted(CLUSTERS))
@pytest.mark.parametrize("gpn", [2, 4, 8])
def test_groups_priced_from_their_base_give_the_same_group(name: str, gpn: int) -> None:
    spec = dict(CLUSTERS[name])
    placement = spec.pop("placement", None)
    if placement and placement.get("node_order") == "reversed":
        placement = {**placement, "node_order": list(range(32 // gpn))[::-1]}
    c = _cluster(gpn, placement, **spec)
    seen: set[str] = set()
    shifted: set[str] = set()  # the fastest dimensions whose layouts were priced from their base
    for tp, cp, pp, order in itertools.product((1, 2, 4, 8), (1, 2), (1, 2, 4), ORDERS):
        if tp * cp * pp > 16:
            continue
        p = Parallel.of(tp=tp, cp=cp, dp=32 // (tp * cp * pp), pp=pp, ep=2 if tp * cp * pp <= 8 else 1, order=order)
        for dim, op in PRICED:
            g = groups_of(p, dim)
            if len(g) == 0 or g.shape[1] < 2:
                continue
            want = communicator(c, op, g.lists())  # every group written out
            got = group_shape(c, op, g)
            # every field, those left out of == (crossings, NIC share) too
            assert astuple(got) == astuple(want), (tp, cp, pp, order, dim, op)
            seen.update(pat for pat, x in want.crossing or () if x.stage is not None)
            base = g.within(gpn)
            if base is not None and shifts_apply(c, op, *base):
                shifted.add(_fastest(p)[0])
    if name.startswith("fat") and gpn < 8:  # the counts were compared where a stage binds, for every pattern
        assert {"p2p", "ring", "tree"} <= seen
    assert shifted == {"tp", "cp", "dp", "pp"}  # every fastest dimension was priced from its base somewhere


def test_copies_and_runs_must_stay_on_their_nodes() -> None:
    c = _cluster(4, switch_radix=10, oversubscription=4)
    with pytest.raises(ValueError, match=r"copies \(2\) or runs \(1\)"):
        communicator(c, "send_recv", np.array([[1, 5]]), copies=2)  # rank 1 + 1 is fine, but 1 is not even
    with pytest.raises(ValueError, match=r"copies \(8\) or runs \(1\)"):
        communicator(c, "send_recv", np.array([[0, 8]]), copies=8)  # 8 copies of rank 0 leave a node of 4
    a2a = communicator(c, "all_to_all", np.array([[0, 4]]), copies=2)  # counted in whole units of 1 / n
    assert astuple(a2a) == astuple(communicator(c, "all_to_all", [[0, 4], [1, 5]]))
    slow = cluster_from_mapping({
        "name": "copies-degraded", "nodes": 8, "gpus_per_node": 4, "gpu": "h100-sxm",
        "scale_up": {"link": "nvlink4", "domain_gpus": 4}, "nics": {"compute": {"per_node": 2, "speed_gbit_s": 400}},
        "fabric": {"transport": "infiniband", "tiers": 2, "switch_radix": 10, "oversubscription": 4},
        "degraded": [{"node": 1, "nic": 0, "rate": 0.5}]})
    with pytest.raises(ValueError, match=r"copies \(2\) or runs \(1\)"):
        communicator(slow, "all_reduce", np.array([[0, 4]]), copies=2)  # a copy's members use other NICs
    nvl = cluster_from_mapping({
        "name": "copies-nvl", "nodes": 8, "gpus_per_node": 4, "gpu": "h100-sxm",
        "scale_up": {"link": "nvlink4", "domain_gpus": 8}, "nics": {"compute": {"per_node": 2, "speed_gbit_s": 400}},
        "fabric": {"transport": "infiniband", "tiers": 2, "switch_radix": 8}})
    assert communicator(nvl, "send_recv", np.array([[0, 8]]), copies=2).ranks == 2
    with pytest.raises(ValueError, match=r"copies \(2\) or runs \(1\)"):
        communicator(nvl, "all_reduce", np.array([[0, 8]]), copies=2)  # a ring's domain spans nodes: every group
    with pytest.raises(ValueError, match=r"copies \(1\) or runs \(2\)"):
        communicator(c, "send_recv", np.array([[0, 4]]), runs=2)  # a pair is two ranks
    with pytest.raises(ValueError, match=r"copies \(2\) or runs \(2\)"):
        communicator(c, "all_reduce", np.array([[0, 4]]), copies=2, runs=2)  # one or the other
    assert communicator(c, "all_reduce", np.array([[0, 4]]), runs=2).ranks == 4


def test_groups_pickle_before_and_after_their_array_is_made() -> None:
    p = Parallel.of(tp=4, cp=1, dp=4, pp=4)
    for dim in ("pp_pairs", "dp", "tp"):  # shifted copies (array made when read) and an array made at once
        g = groups_of(p, dim)
        for _ in range(2):
            fresh = pickle.loads(pickle.dumps(g))
            assert (fresh.key, fresh.shape, fresh.copies) == (g.key, g.shape, g.copies)
            assert fresh.lists() == g.lists()  # the second time round, g's array is made
