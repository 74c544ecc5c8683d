"""A layout's communicators as :class:`~slowlink.workload.comm.Groups` when TP is the fastest dimension: the groups
of the other TP ranks given as shifted copies of the first TP rank's (dimensions without TP), or the other TP
ranks of a group as runs after its first TP rank (dimensions with TP), and priced from those alone to the same
Group."""

from __future__ import annotations

import itertools
import pickle
from dataclasses import astuple
from typing import Any

import numpy as np
import pytest

from slowlink.collectives.communicator import communicator
from slowlink.spec.cluster import Cluster, cluster_from_mapping
from slowlink.spec.workload import Parallel
from slowlink.workload.comm import group_shape, groups_of
from slowlink.workload.placement import dimension_groups

LAYOUTS = [Parallel.of(tp=tp, cp=cp, dp=dp, pp=pp, order=order)
           for tp, cp, dp, pp, order in itertools.product((2, 4), (1, 2), (2, 4), (2, 4),
                                                          ("tp-cp-dp-pp", "tp-cp-pp-dp", "tp-pp-dp-cp"))]


def _pairs_by_hand(p: Parallel, dim: str) -> list[list[int]]:
    """The pairs written out from the groups, one group after another (pp: each stage to the next; cp: each ring
    position to the next, around)."""
    if dim == "pp_pairs":
        return [[g[i], g[i + 1]] for g in dimension_groups(p, "pp") for i in range(len(g) - 1)]
    return [[g[i], g[(i + 1) % len(g)]] for g in dimension_groups(p, "cp") for i in range(len(g))]


INNER = {"pp_pairs": lambda p: p.pp - 1, "cp_pairs": lambda p: p.cp, "edp": lambda p: p.ep}  # rows per copy


@pytest.mark.parametrize("p", LAYOUTS, ids=lambda p: f"tp{p.tp}cp{p.cp}dp{p.dp}pp{p.pp}-{p.order}")
@pytest.mark.parametrize("dim", ["pp_pairs", "cp_pairs"])
def test_shifted_copies_are_the_pairs_written_out(p: Parallel, dim: str) -> None:
    g = groups_of(p, dim)
    assert g.copies == p.tp and g.base is not None
    full = _pairs_by_hand(p, dim)
    assert len(g) == len(full) and g.shape == (len(full), 2)
    assert g.lists() == full
    assert (g.base % p.tp == 0).all()


WITH_EP = [Parallel.of(tp=2, cp=1, dp=8, pp=2, ep=4), Parallel.of(tp=4, cp=2, dp=4, pp=1, ep=2, order="tp-dp-cp-pp")]


@pytest.mark.parametrize("p", [*LAYOUTS, *WITH_EP],
                         ids=lambda p: f"tp{p.tp}cp{p.cp}dp{p.dp}pp{p.pp}ep{p.ep}-{p.order}")
@pytest.mark.parametrize("dim", ["pp_pairs", "cp_pairs", "dp", "cp", "dp_cp", "pp", "ep", "edp"])
def test_the_groups_are_their_base_and_its_copies_in_order(p: Parallel, dim: str) -> None:
    g = groups_of(p, dim)
    assert g.copies == p.tp and g.base is not None
    assert g.shape == np.asarray(g).shape
    inner = INNER.get(dim, lambda p: 1)(p)
    if inner == 0:  # one stage: no pipeline pairs
        return
    w = g.base.shape[1]
    # row (outer, j, inner) of the groups is row (outer, inner) of base shifted by j: the order written out
    built = (g.base.reshape(-1, 1, inner, w) + np.arange(p.tp)[:, None, None]).reshape(-1, w)
    assert np.array_equal(built, np.asarray(g))
    if dim not in ("pp_pairs", "cp_pairs", "edp"):
        assert g.lists() == dimension_groups(p, dim)  # type: ignore[arg-type]


@pytest.mark.parametrize("p", [*LAYOUTS, *WITH_EP], ids=lambda p: f"tp{p.tp}cp{p.cp}dp{p.dp}pp{p.pp}ep{p.ep}-{p.order}")
@pytest.mark.parametrize("dim", ["tp", "tp_cp", "tp_pp", "tp_cp_dp", "world"])
def test_groups_with_tp_are_their_base_and_its_runs(p: Parallel, dim: str) -> None:
    g = groups_of(p, dim)
    assert g.runs == p.tp and g.copies == 1 and g.base is not None
    assert g.shape == (g.base.shape[0], g.base.shape[1] * p.tp)
    assert [g[0], g[-1], g[:2]] == [dimension_groups(p, dim)[i] for i in (0, -1)] + [dimension_groups(p, dim)[:2]]  # type: ignore[arg-type]
    assert g.lists() == dimension_groups(p, dim)  # type: ignore[arg-type]
    assert np.array_equal((g.base[:, :, None] + np.arange(p.tp)).reshape(g.shape), np.asarray(g))


def test_without_tp_fastest_the_pairs_are_written_out() -> None:
    for p in (Parallel.of(tp=1, cp=1, dp=2, pp=4), Parallel.of(tp=2, cp=1, dp=2, pp=4, order="cp-tp-dp-pp")):
        g = groups_of(p, "pp_pairs")
        assert g.base is None and g.copies == 1
        assert g.lists() == _pairs_by_hand(p, "pp_pairs")


def _cluster(gpn: int, **fabric: Any) -> Cluster:
    return cluster_from_mapping({
        "name": f"copies-{gpn}-{sorted(fabric.items())}", "nodes": 32 // gpn, "gpus_per_node": gpn,
        "gpu": "h100-sxm", "scale_up": {"link": "nvlink4", "domain_gpus": gpn},
        "nics": {"compute": {"per_node": 2, "speed_gbit_s": 400}},
        "fabric": {"transport": "infiniband", "tiers": 2, **fabric}})


CLUSTERS = {
    "fat2-4to1": {"switch_radix": 10, "oversubscription": 4},
    "rail2": {"topology": "rail-optimized", "switch_radix": 8},
    "fat3": {"switch_radix": 4, "tiers": 3, "oversubscription": [1, 1, 2]},
    "dragonfly": {"topology": "dragonfly", "switch_radix": 4, "dragonfly": {"groups": 4}},
}


PRICED = [("pp_pairs", "send_recv"), ("cp_pairs", "send_recv"), ("dp", "all_reduce"), ("dp", "reduce_scatter"),
          ("dp_cp", "all_reduce"), ("cp", "all_gather"), ("pp", "all_reduce"), ("edp", "all_gather"),
          ("tp", "all_gather"), ("tp_cp", "all_reduce"), ("tp_pp", "all_reduce"), ("tp_cp_dp", "reduce_scatter"),
          ("world", "all_reduce"), ("ep", "all_to_all"), ("tp", "all_to_all")]


@pytest.mark.parametrize("name", sorted(CLUSTERS))
@pytest.mark.parametrize("gpn", [2, 4, 8])
def test_groups_priced_from_their_base_give_the_same_group(name: str, gpn: int) -> None:
    c = _cluster(gpn, **CLUSTERS[name])
    seen: set[str] = set()
    for tp, cp, pp, order in itertools.product((2, 4, 8), (1, 2), (2, 4), ("tp-cp-dp-pp", "tp-cp-pp-dp")):
        if tp * cp * pp > 32:
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
    if name.startswith("fat") and gpn < 8:  # the counts were compared where a stage binds, for every pattern
        assert {"p2p", "ring", "tree"} <= seen


def test_copies_and_runs_must_stay_on_their_nodes() -> None:
    c = _cluster(4, switch_radix=10, oversubscription=4)
    with pytest.raises(ValueError, match=r"copies \(2\) or runs \(1\)"):
        communicator(c, "send_recv", np.array([[1, 5]]), copies=2)  # rank 1 + 1 is fine, but 1 is not even
    with pytest.raises(ValueError, match=r"copies \(8\) or runs \(1\)"):
        communicator(c, "send_recv", np.array([[0, 8]]), copies=8)  # 8 copies of rank 0 leave a node of 4
    with pytest.raises(ValueError, match=r"copies \(2\) or runs \(1\)"):
        communicator(c, "all_to_all", np.array([[0, 4]]), copies=2)  # counts members per domain: every group
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
