"""The degraded parts' penalty of concurrent groups (:func:`slowlink.topology.degraded.group_penalty`), which reads
only the groups with a member on a degraded node and only their members there, against the rule written out over
every member of every group: the (node, NIC) pairs a group's traffic crosses (the NIC-affinity rule), the slowest
degraded one among them (the first in (node, NIC) order at that rate), a delayed node's delay."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from slowlink.collectives.communicator import place
from slowlink.spec.cluster import Cluster, cluster_from_mapping
from slowlink.topology.degraded import NO_PENALTY, Penalty, group_penalty
from slowlink.topology.nic import affine_nics, peer_nics


def _every_member(c: Cluster, pattern: str, ranks: list[int], nodes: list[int], domains: list[int]) -> Penalty:
    gpn, nics, d = c.gpus_per_node, c.compute_nics.per_node, c.degraded
    n_dom = len(set(domains))
    if n_dom < 2 and not (pattern == "p2p" and nodes[0] != nodes[-1]):
        return NO_PENALTY
    local = [r % gpn for r in ranks]
    if pattern == "p2p":
        used = {(n, x) for n in (nodes[0], nodes[-1]) for x in affine_nics(nics, gpn, local[0])}
    elif pattern == "a2a":
        on: dict[int, list[int]] = {}
        for n, g in zip(nodes, local, strict=True):
            on.setdefault(n, []).append(g)
        rails = {x for gs in on.values() for s in gs for t in local for x in peer_nics(nics, gpn, s, t, gs)}
        used = {(n, x) for n in on for x in rails}
    else:
        used = {(n, x) for n, g in zip(nodes, local, strict=True) for x in affine_nics(nics, gpn, g)}
    rate, part = 1.0, ""
    for key in sorted(used):
        r = d.nic_rate.get(key)
        if r is not None and r < rate:
            rate, part = r, f"node {key[0]} NIC {key[1]} at {r:.0%}"
    extra = 0.0
    delayed = [(d.node_delay_s[n], n) for n in set(nodes) if n in d.node_delay_s]
    if delayed:
        delay, node = max(delayed)
        extra = delay if pattern in ("a2a", "p2p") else 2 * delay / max(1, n_dom)
        part = part or f"node {node} +{delay * 1e3:g} ms"
    return Penalty(1.0 / rate, extra, part)


def _cluster(gpn: int, nics: int, degraded: list[dict[str, Any]], placement: dict[str, Any] | None) -> Cluster:
    return cluster_from_mapping({
        "name": "penalty", "nodes": 16, "gpus_per_node": gpn, "gpu": "h100-sxm",
        "scale_up": {"link": "nvlink4", "domain_gpus": gpn},
        "nics": {"compute": {"per_node": nics, "speed_gbit_s": 400}},
        "fabric": {"transport": "infiniband", "tiers": 2, "switch_radix": 16}, "degraded": degraded,
        **({"placement": placement} if placement else {})})


PARTS = [[{"node": 3, "nic": 0, "rate": 0.5}], [{"node": 1, "delay_ms": 5}],
         [{"node": 2, "nic": 1, "rate": 0.25}, {"node": 5, "delay_ms": 2}, {"node": 5, "nic": 0, "rate": 0.5}],
         [{"node": 0, "nic": 1, "rate": 0.7}, {"node": 9, "nic": 0, "rate": 0.7}]]


@pytest.mark.parametrize(("gpn", "nics"), [(8, 8), (8, 2), (4, 4), (4, 8)])
@pytest.mark.parametrize("parts", range(len(PARTS)))
@pytest.mark.parametrize("placement", [None, {"mode": "fragmented", "seed": 4}])
def test_penalty_is_the_rule_over_every_member(gpn: int, nics: int, parts: int,
                                                placement: dict[str, Any] | None) -> None:
    c = _cluster(gpn, nics, PARTS[parts], placement)
    gpus = 16 * gpn
    rng = np.random.default_rng(parts)
    layouts = [np.arange(gpus).reshape(size, -1).T for size in (2, 4, 16)]  # one member per block of ranks
    layouts += [np.arange(gpus).reshape(-1, size) for size in (8, gpus)]
    layouts += [np.sort(rng.permutation(gpus).reshape(-1, 8), axis=1)]
    priced = 0
    for groups in layouts:
        for pattern in ("ring", "tree", "a2a"):
            p = place(c, groups)
            want = max((_every_member(c, pattern, r, n, d) for r, n, d in
                        zip(p.ranks.tolist(), p.nodes.tolist(), p.domains.tolist(), strict=True)),
                       key=lambda x: (x.factor, x.extra_hop_lat_s))
            got = group_penalty(c, pattern, p.ranks, p.nodes, p.domains)
            assert (got.factor, got.extra_hop_lat_s) == (want.factor, want.extra_hop_lat_s)
            if want:  # the same part named (the first group at the worst penalty)
                assert got.part == want.part
                priced += 1
        pairs = place(c, np.stack([groups[:, 0], groups[:, -1]], axis=1), ring_order=False)
        want = max((_every_member(c, "p2p", r, n, d) for r, n, d in
                    zip(pairs.ranks.tolist(), pairs.nodes.tolist(), pairs.domains.tolist(), strict=True)),
                   key=lambda x: (x.factor, x.extra_hop_lat_s))
        got = group_penalty(c, "p2p", pairs.ranks, pairs.nodes, pairs.domains)
        assert (got.factor, got.extra_hop_lat_s, got.part) == (want.factor, want.extra_hop_lat_s, want.part)
    assert priced > 0
