"""Ring, point-to-point and tree phases built as arrays: every flow of every group at once, no per-GPU Python call.

The same flows, in the same order, with the same sizes and per-step latency as the per-flow builders of
:mod:`slowlink.sim.flows` (:func:`~slowlink.sim.flows.ring_phase`, :func:`~slowlink.sim.flows.send_recv_phase`)
and :mod:`slowlink.sim.trees` (:func:`~slowlink.sim.trees.tree_phase`, from :func:`domain_channels_array`), so
every time computed from them is the same to the last bit; only the cost differs (numpy over all ranks
instead of a Python call per GPU). They apply to the regular case a training step produces: groups of one
size, each group's scale-up domains holding equal runs of consecutive ranks inside one node, every domain
with as many channels, a fat tree (one path per flow: :attr:`~slowlink.topology.fabric.Topology.route_array`).
Elsewhere they answer None and the caller builds flow by flow.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from slowlink.collectives.communicator import domain_channels
from slowlink.topology.fabric import Topology, tag_id
from slowlink.topology.nic import affine_nics


@dataclass(frozen=True)
class FlowArrays:
    """Flows as arrays: ``links`` (flows, hops) link ids padded with -1, ``size_bytes`` and ``group`` per flow."""

    links: np.ndarray
    size_bytes: np.ndarray
    group: np.ndarray

    def __len__(self) -> int:
        return int(self.size_bytes.size)


def _sum_hops(lat: np.ndarray, links: np.ndarray) -> np.ndarray:
    """Summed latency of each padded path, added hop by hop from the first (as ``sum()`` over the path does)."""
    per = lat[links]  # -1 pads read the trailing 0.0
    out: np.ndarray = per[..., 0].copy()
    for j in range(1, per.shape[-1]):
        out = out + per[..., j]
    return out


def _latencies(topo: Topology) -> np.ndarray:
    return np.asarray([*topo.latency_s, 0.0], dtype=np.float64)


def _domains(topo: Topology, groups: Sequence[Sequence[int]]) -> tuple[np.ndarray, int] | None:
    """Groups as a (groups, domains, ranks per domain) array in NCCL's ring order, and the domain count; None
    unless every group's domains are equal runs of consecutive sorted ranks, each inside one node."""
    try:
        ranks = np.asarray(groups, dtype=np.int64)
    except ValueError:
        return None
    if ranks.ndim != 2 or ranks.shape[1] < 2 or topo.gpus_per_node % topo.domain_gpus:
        return None
    ranks = np.sort(ranks, axis=1)
    dom = topo.gpu_array(ranks) // topo.domain_gpus
    n = ranks.shape[1]
    cuts = dom[:, 1:] != dom[:, :-1]
    d = int(cuts[0].sum()) + 1
    if n % d:
        return None
    m = n // d
    # a run per domain: cuts exactly every m ranks, and no domain twice (sorted domains change as often)
    if not (cuts[:, m - 1::m].all() and cuts.sum() == (d - 1) * ranks.shape[0]):
        return None
    srt = np.sort(dom[:, ::m], axis=1)
    if d > 1 and not (srt[:, 1:] != srt[:, :-1]).all():
        return None
    return ranks.reshape(-1, d, m), d


def _channels(topo: Topology, doms: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Every domain's channels (:func:`~slowlink.collectives.communicator.domain_channels`) as the positions of
    their head ranks in the domain and their local NICs, (groups, domains, k) each; None unless every domain
    has the same count ``k``. A domain inside one node: its channels follow from its members' local GPUs."""
    gpn, nics = topo.gpus_per_node, topo.nics_per_node
    local = doms % gpn
    mask = (np.left_shift(np.int64(1), local)).sum(axis=2) if gpn < 63 else None
    if mask is None:
        return None
    _, first, inv = np.unique(mask.ravel(), return_index=True, return_inverse=True)  # a domain of each member set
    flat = local.reshape(-1, local.shape[2])
    heads, nic = [], []
    for i in first:
        ch = domain_channels(flat[i].tolist(), [0] * flat.shape[1], gpn, nics)
        pos = {r: p for p, r in enumerate(flat[i].tolist())}
        heads.append([pos[r] for r, _, _ in ch])
        nic.append([ln for _, _, ln in ch])
    k = len(heads[0])
    if any(len(h) != k for h in heads) or k == 0:
        return None
    shape = (*doms.shape[:2], k)
    return np.asarray(heads)[inv].reshape(shape), np.asarray(nic)[inv].reshape(shape)


def domain_channels_array(topo: Topology, groups: Sequence[Sequence[int]]
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The regular case's groups as (groups, domains, ranks per domain) ranks in NCCL's ring order, with every
    domain's channels (:func:`~slowlink.collectives.communicator.domain_channels`) as the positions of their head
    ranks in the domain and their local NICs, (groups, domains, k) each; None outside it (module docstring)."""
    placed = _domains(topo, groups)
    if placed is None:
        return None
    ch = _channels(topo, placed[0])
    return None if ch is None else (placed[0], *ch)


def path_latencies(topo: Topology, links: np.ndarray) -> np.ndarray:
    """Summed link latency of each padded path (``sim.phase.path_latency`` of every path, the same sums)."""
    return _sum_hops(_latencies(topo), links)


def ring_arrays(topo: Topology, groups: Sequence[Sequence[int]], chunk_bytes: float,
                tag: str) -> tuple[FlowArrays, float] | None:
    """One ring step of every group as arrays (:func:`slowlink.sim.flows.ring_phase`'s flows in its order),
    and the phase's per-step latency; None outside the regular case (module docstring)."""
    placed = _domains(topo, groups)
    if placed is None:
        return None
    doms, d = placed
    g, _, m = doms.shape
    gpus = topo.gpu_array(doms)
    up, down = np.asarray(topo.gpu_up, dtype=np.int64), np.asarray(topo.gpu_down, dtype=np.int64)
    lat = _latencies(topo)
    # inside each domain: rank i -> i + 1 over the scale-up switch
    intra = np.stack((up[gpus[:, :, :-1]], down[gpus[:, :, 1:]]), axis=3)  # (g, d, m-1, 2)
    if d == 1:  # the ring closes inside the domain
        exits = np.stack((up[gpus[:, :, -1]], down[gpus[:, :, 0]]), axis=2)[:, :, None, :]  # (g, 1, 1, 2)
        exit_size = np.full(exits.shape[:3], chunk_bytes * 1.0)
        exit_lat = _sum_hops(lat, exits)[:, :, 0]
    else:
        if topo.route_array is None:
            return None
        ch = _channels(topo, doms)
        if ch is None:
            return None
        head, nic = ch
        k = head.shape[2]
        nxt = np.roll(np.arange(d), -1)
        src = np.take_along_axis(doms, head, axis=2)
        dst, ld = src[:, nxt, :], nic[:, nxt, :]  # channel c to the next domain's c-th (same count)
        key = tag_id(tag) + np.arange(k)
        paths = topo.gpu_path_array(src.ravel(), dst.ravel(), nic.ravel(), np.broadcast_to(key, src.shape).ravel(),
                                    ld.ravel())
        if paths is None:
            return None
        exits = paths.reshape(g, d, k, -1)
        exit_size = np.full(exits.shape[:3], chunk_bytes * (1.0 / k))
        exit_lat = _sum_hops(lat, exits).max(axis=2)
    width = max(intra.shape[3], exits.shape[3])
    pad = np.full((g, d, m - 1 + exits.shape[2], width), -1, dtype=np.int64)
    pad[:, :, :m - 1, :2] = intra
    pad[:, :, m - 1:, :exits.shape[3]] = exits
    sizes = np.concatenate((np.full((g, d, m - 1), chunk_bytes * 1.0), exit_size), axis=2)
    group = np.broadcast_to(np.arange(g)[:, None, None], sizes.shape)
    # per-step latency: the group's hop latencies summed in ring order, over its hops (ranks)
    hop_lat = np.concatenate((_sum_hops(lat, intra), exit_lat[:, :, None]), axis=2).reshape(g, -1)
    step = float(max(0.0, (np.cumsum(hop_lat, axis=1)[:, -1] / max(1, d * m)).max()))
    return FlowArrays(pad.reshape(-1, width), sizes.ravel(), group.ravel()), step


def send_recv_arrays(topo: Topology, pairs: Sequence[Sequence[int]], size_bytes: float,
                     tag: str) -> tuple[FlowArrays, float] | None:
    """Every ``[src, dst]`` pair's flows as arrays (:func:`slowlink.sim.flows.send_recv_phase`'s, in its order:
    over the source GPU's affine NICs, rail to rail, or the scale-up switch inside a domain), and the phase's
    per-step latency (its slowest path); None outside the regular case."""
    try:
        p = np.asarray(pairs, dtype=np.int64)
    except ValueError:
        return None
    if p.ndim != 2 or p.size == 0 or topo.route_array is None:
        return None
    src, dst = p[:, 0], p[:, -1]
    gpn, nics = topo.gpus_per_node, topo.nics_per_node
    per = len(affine_nics(nics, gpn, 0))
    if any(len(affine_nics(nics, gpn, i)) != per for i in range(gpn)):
        return None
    table = np.asarray([affine_nics(nics, gpn, i) for i in range(gpn)], dtype=np.int64)
    gs, gd = topo.gpu_array(src), topo.gpu_array(dst)
    inside = gs // topo.domain_gpus == gd // topo.domain_gpus
    if inside.any() and (~inside).any():
        return None  # a mix of both kinds: their flow counts differ per pair
    lat = _latencies(topo)
    if inside.all():
        up, down = np.asarray(topo.gpu_up, dtype=np.int64), np.asarray(topo.gpu_down, dtype=np.int64)
        links = np.stack((up[gs], down[gd]), axis=1)
        links[gs == gd] = -1
        sizes = np.full(len(p), size_bytes * 1.0)
        group = np.arange(len(p))
    else:
        ln = table[src % gpn]  # (pairs, per)
        key = tag_id(tag) + np.arange(per)
        s2, d2 = np.repeat(src, per), np.repeat(dst, per)
        paths = topo.gpu_path_array(s2, d2, ln.ravel(), np.tile(key, len(p)), ln.ravel())
        if paths is None:
            return None
        links = paths
        sizes = np.full(len(s2), size_bytes * (1.0 / per))
        group = np.repeat(np.arange(len(p)), per)
    step = float(max(0.0, _sum_hops(lat, links).max(initial=0.0)))
    return FlowArrays(links, sizes, group), step
