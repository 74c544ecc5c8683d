"""Domain-to-domain edges over the domains' channels, every group at once (``communicator._channel_edges``),
against the rule written out one domain at a time: :func:`domain_channels` of each domain, channel ``c`` of the
sender to the receiver's ``c``-th (mod its count), ``weight`` split over the sender's channels, edges in the
order of the groups, the pairs and the channels."""

from __future__ import annotations

import itertools
from itertools import pairwise

import numpy as np
import pytest

from slowlink.collectives.communicator import _channel_edges, domain_channels, place
from slowlink.collectives.nccl_trees import tree_edges
from slowlink.spec.cluster import Cluster, cluster_from_mapping

Edges = tuple[list[int], list[int], list[float]]


def _one_domain_at_a_time(cluster: Cluster, ranks: np.ndarray, nodes: np.ndarray, domains: np.ndarray,
                          pairs: list[tuple[int, int]] | None, weight: float) -> Edges:
    gpn, nics = cluster.gpus_per_node, cluster.compute_nics.per_node
    src: list[int] = []
    dst: list[int] = []
    w: list[float] = []
    for rk, nd, dm in zip(ranks.tolist(), nodes.tolist(), domains.tolist(), strict=True):
        cuts = [0] + [i for i in range(1, len(dm)) if dm[i] != dm[i - 1]] + [len(dm)]
        chans = [[n for _, n, _ in domain_channels(rk[a:b], nd[a:b], gpn, nics)] for a, b in pairwise(cuts)]
        d = len(chans)
        ring = [(i, (i + 1) % d) for i in range(d)] if d > 1 else []
        for a, b in ring if pairs is None else pairs:
            if max(a, b) >= d:
                continue
            ca, cb = chans[a], chans[b]
            src += ca
            dst += [cb[c % len(cb)] for c in range(len(ca))]
            w += [weight / len(ca)] * len(ca)
    return src, dst, w


def _nvl(gpn: int, nics: int, domain: int, nodes: int, placement: dict[str, object] | None) -> Cluster:
    return cluster_from_mapping({
        "name": f"chan-{gpn}-{nics}-{domain}-{nodes}-{placement}", "nodes": nodes, "gpus_per_node": gpn,
        "gpu": "gb200", "scale_up": {"link": "nvlink5", "domain_gpus": domain},
        "nics": {"compute": {"per_node": nics, "speed_gbit_s": 400}},
        "fabric": {"transport": "infiniband", "topology": "rail-optimized", "tiers": 2},
        **({"placement": placement} if placement else {})})


CASES = [(4, 4, 16, 16), (4, 1, 8, 16), (4, 8, 8, 8), (8, 2, 16, 8), (2, 2, 8, 16)]  # gpn, nics, domain, nodes


@pytest.mark.parametrize(("gpn", "nics", "domain", "nodes"), CASES)
@pytest.mark.parametrize("placement", [None, {"mode": "fragmented", "seed": 5}])
def test_channel_edges_are_the_rule_one_domain_at_a_time(gpn: int, nics: int, domain: int, nodes: int,
                                                         placement: dict[str, object] | None) -> None:
    c = _nvl(gpn, nics, domain, nodes, placement)
    gpus = gpn * nodes
    rng = np.random.default_rng(gpn * 100 + nics)
    layouts = [np.arange(gpus).reshape(-1, size) for size in (2, 4, 8, gpus // 2, gpus) if size <= gpus]
    layouts += [np.arange(gpus).reshape(size, -1).T for size in (2, 4)]  # strided: one member per block of ranks
    layouts += [np.sort(rng.permutation(gpus).reshape(-1, 8), axis=1), rng.permutation(gpus)[None, :]]
    compared = 0
    for groups in layouts:
        p = place(c, groups)
        d = len(set(p.domains[0].tolist()))
        both = [(a, b) for ch, par in tree_edges(d) for a, b in ((ch, par), (par, ch))]
        for pairs, weight in ((None, 1.0), (both, 0.5), ([(0, 1), (2, 0)], 0.25)):
            src, dst, w = _channel_edges(c, p, pairs, weight)
            want = _one_domain_at_a_time(c, p.ranks, p.nodes, p.domains, pairs, weight)
            assert (src.tolist(), dst.tolist(), w.tolist()) == want
            compared += len(want[0])
    assert compared > 0


def test_groups_of_unequal_domain_counts_keep_their_own_rings() -> None:
    c = _nvl(4, 4, 8, 8, None)
    # the first group spans 4 domains, the second 2: each ring closes over its own
    p = place(c, np.array([[0, 8, 16, 24], [1, 2, 9, 10]]))
    for pairs, weight in ((None, 1.0), ([(0, 1), (1, 2), (3, 0)], 0.5)):
        src, dst, w = _channel_edges(c, p, pairs, weight)
        assert (src.tolist(), dst.tolist(), w.tolist()) == _one_domain_at_a_time(c, p.ranks, p.nodes, p.domains,
                                                                                  pairs, weight)


def test_a_ring_inside_one_domain_has_no_edges() -> None:
    c = _nvl(4, 4, 16, 8, None)
    src, dst, w = _channel_edges(c, place(c, np.arange(32).reshape(-1, 16)), None, 1.0)
    assert len(src) == len(dst) == len(w) == 0


@pytest.mark.parametrize(("gpn", "nics", "domain", "nodes"), CASES[:2])
def test_placed_domains_keep_their_members_together_in_order_of_their_lowest_rank(
        gpn: int, nics: int, domain: int, nodes: int) -> None:
    c = _nvl(gpn, nics, domain, nodes, {"mode": "fragmented", "seed": 1})
    groups = np.sort(np.random.default_rng(7).permutation(gpn * nodes).reshape(-1, 8), axis=1)
    p = place(c, groups)
    for rk, dm in zip(p.ranks.tolist(), p.domains.tolist(), strict=True):
        runs = [k for k, _ in itertools.groupby(dm)]
        assert len(runs) == len(set(runs))  # each domain's members together
        lowest = [min(r for r, x in zip(rk, dm, strict=True) if x == k) for k in runs]
        assert lowest == sorted(lowest)  # domains by their lowest rank
        for k in runs:  # a domain's members in rank order
            mine = [r for r, x in zip(rk, dm, strict=True) if x == k]
            assert mine == sorted(mine)
