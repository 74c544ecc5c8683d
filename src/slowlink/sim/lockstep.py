"""Pipelined collectives as coflows: every flow of one group advances in lockstep; groups share links fairly.

A pipelined collective (an NCCL ring, tree or NVLS channel) moves its data in chunks through every hop, and
no hop runs ahead of the slowest by more than the few buffered steps NCCL keeps in flight (``NCCL_STEPS``),
so in the fluid limit all flows of one group advance at one common *progress rate* ``x`` (fraction of the
group's bytes per second): the group is a coflow whose load on link ``l`` is ``L[g, l]`` bytes.

* Alone, a group finishes in ``max_l L[g, l] / C_l``: its hottest link. This is also a lower bound on any
  schedule of those bytes, so the lockstep model is exact for one pipelined collective alone on its links.
* Groups that share a link run at progress rates ``x_g`` with ``sum_g x_g L[g, l] <= C_l``. Links share
  bytes fairly between flows, so the allocation is max-min fair in ``y_g = x_g max_l L[g, l]``, the bytes/s
  each group moves on its own heaviest link (weighted progressive filling, Bertsekas & Gallager, *Data
  Networks*, 6.5.2), recomputed each time a group finishes. Two equal groups on one link get half each;
  a small and a big one get equal bytes/s until the small one is done.

Shortcuts, each stated: fluid (no packets, no queues); latency is the caller's (added per step); groups
that share no link with any other group are solved in closed form (exact: their constraints are
independent); a group's finish is relative to a common start at 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from slowlink.sim.engine import FloatArray, max_min_rates

_REL_EPS = 1e-9


@dataclass(frozen=True)
class Lockstep:
    """Per group: its finish time (s); per link: bytes carried and peak load / capacity."""

    finish_s: FloatArray
    link_bytes: FloatArray
    peak_utilisation: FloatArray
    events: int


def group_loads(paths: Sequence[tuple[int, ...]], sizes: Sequence[float], group_of: Sequence[int],
                n_groups: int, n_links: int) -> sp.csr_matrix:
    """``L[g, l]``: the bytes group ``g``'s flows put on link ``l`` (groups x links, CSR)."""
    lengths = np.fromiter((len(p) for p in paths), dtype=np.int64, count=len(paths))
    rows = np.repeat(np.asarray(group_of, dtype=np.int64), lengths)
    cols = np.fromiter((x for p in paths for x in p), dtype=np.int64, count=int(lengths.sum()))
    data = np.repeat(np.asarray(sizes, dtype=np.float64), lengths)
    m = sp.csr_matrix((data, (rows, cols)), shape=(n_groups, n_links))
    m.sum_duplicates()
    m.eliminate_zeros()
    return m


def _alone_s(load: sp.csr_matrix, cap: FloatArray) -> FloatArray:
    """``max_l L[g, l] / C_l`` per group (0 for a group with no bytes)."""
    scaled = load.multiply(1.0 / cap[np.newaxis, :]).tocsr()
    return np.asarray(scaled.max(axis=1).toarray()).ravel()


def _shared_groups(load: sp.csr_matrix) -> NDArray[np.bool_]:
    """Groups with at least one link that another group also uses."""
    per_link = np.diff(load.tocsc().indptr)
    shared_links = (per_link > 1).astype(np.float64)
    return np.asarray(load @ shared_links).ravel() > 0


def solve(capacity_bytes_s: Sequence[float] | FloatArray, load: sp.csr_matrix) -> Lockstep:
    """Finish time of every group of ``load`` (groups x links, bytes) under the lockstep model."""
    cap = np.asarray(capacity_bytes_s, dtype=np.float64)
    n = load.shape[0]
    finish = _alone_s(load, cap)
    link_bytes = np.asarray(load.sum(axis=0)).ravel()
    peak = np.zeros(cap.size)
    shared = _shared_groups(load) if n > 1 else np.zeros(n, dtype=bool)
    lone = np.flatnonzero(~shared & (finish > 0))
    if lone.size:
        # one group per link: each runs at its own pace, its hottest link full
        peak = np.maximum(peak, (load[lone].T @ (1.0 / finish[lone])) / cap)
    events = 1 if lone.size else 0
    idx = np.flatnonzero(shared)
    remaining = np.ones(idx.size)
    t = 0.0
    heaviest = np.asarray(load.max(axis=1).toarray()).ravel()
    while idx.size:
        sub = load[idx]
        norm = sp.diags(1.0 / heaviest[idx]) @ sub
        x = max_min_rates(norm.tocsr(), cap) / heaviest[idx]
        rate = sub.T @ x
        peak = np.maximum(peak, rate / cap)
        ttf = remaining / x
        dt = float(ttf.min())
        t += dt
        remaining -= x * dt
        done = (remaining <= _REL_EPS) | (ttf <= dt * (1 + 1e-12))
        finish[idx[done]] = t
        idx, remaining = idx[~done], remaining[~done]
        events += 1
    return Lockstep(finish, link_bytes, peak, events)
