"""Many independent max-min flow problems advanced at once, each exactly as the flow engine runs it alone.

The problems are the link-disjoint components of one phase (flows that all start at 0 with no ``after``).
Every problem keeps its own clock and its own progressive filling (:func:`slowlink.sim.engine.max_min_rates`,
Bertsekas & Gallager, *Data Networks*, 6.5.2), with the same operations on the same numbers as
:func:`slowlink.sim.engine.simulate` on that problem alone; the rounds and events cost the busiest problem's
count instead of the sum over problems. Two rewrites shrink the links in play and change no number:

* links of one capacity crossed by the same flows fill alike (the same count and residual every round) and
  tighten in the same round: one stands for all of them, for the whole phase;
* in each solve, a link that one unfinished flow crosses alone has residual ``c - s1 - s2 - ...`` (``s`` the
  problem's steps) while that flow is unfrozen, whatever the flow: every such link of one capacity in one
  problem is one *class*, a single residual whose share is the residual itself (one flow), and the class
  tightening freezes every unfrozen flow in it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
_REL_EPS = 1e-9  # slowlink.sim.engine: a flow or link within 1e-9 of its size or capacity is done
_TIE = 1 + 1e-12  # slowlink.sim.engine.max_min_rates: links within this factor of the step tighten with it
_MAX_CLASSES = 62  # capacities that form classes (one bit each in an int64)


def _ranges(starts: IntArray, lengths: IntArray) -> IntArray:
    """The indices ``starts[i] .. starts[i] + lengths[i] - 1`` of every range, in order."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.cumsum(lengths) - lengths
    return np.repeat(starts - offsets, lengths) + np.arange(total)


def _mix(x: NDArray[np.uint64], salt: int) -> NDArray[np.uint64]:
    """SplitMix64's finaliser (Steele et al. 2014): a well-spread 64-bit hash of each value."""
    z = x + np.uint64(salt)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    out: NDArray[np.uint64] = z ^ (z >> np.uint64(31))
    return out


def same_users(row: IntArray, col: IntArray, cap: FloatArray) -> IntArray:
    """Per link, the lowest-numbered link of the same capacity that the same flows cross (itself if none):
    entry ``e`` puts flow ``row[e]`` on link ``col[e]``. Grouped by two hashes of the flow sets, then every
    member checked flow by flow against its group's first link (a link that differs stays its own)."""
    n_links = cap.size
    rep = np.arange(n_links)
    order = np.lexsort((row, col))
    rows, cols = row[order], col[order]
    length = np.bincount(cols, minlength=n_links)
    start = np.cumsum(length) - length
    used = np.flatnonzero(length)
    if used.size < 2:
        return rep
    with np.errstate(over="ignore"):
        r = rows.astype(np.uint64)
        h1 = np.add.reduceat(_mix(r, 0x9E3779B97F4A7C15), start[used])
        h2 = np.add.reduceat(_mix(r, 0xD1B54A32D192ED03), start[used])
    cap_id = np.unique(cap[used], return_inverse=True)[1]
    by = np.lexsort((used, h2, h1, length[used], cap_id))  # groups together, lowest link first in each
    key = np.stack((cap_id[by], length[used][by], h1[by].view(np.int64), h2[by].view(np.int64)))
    first = np.concatenate(([True], (key[:, 1:] != key[:, :-1]).any(axis=0)))
    head = used[by][np.maximum.accumulate(np.where(first, np.arange(by.size), 0))]
    links = used[by]
    moved = head != links
    cand, to = links[moved], head[moved]
    same = rows[_ranges(start[cand], length[cand])] == rows[_ranges(start[to], length[cand])]
    bad = np.bincount(np.repeat(np.arange(cand.size), length[cand]), (~same).astype(np.float64),
                      minlength=cand.size) > 0
    rep[cand[~bad]] = to[~bad]
    return rep


@dataclass
class _Solve:
    """One max-min solve of every problem: the unfinished flows (numbered problem by problem, ``comp`` each),
    their entries on links shared in this solve (``row`` ascending, ``col``; ``by_link`` orders them by link,
    the links numbered problem by problem, ``link_comp`` each) and their class bits (bit ``k``: the flow
    crosses a link of capacity ``cls_cap[k]`` alone), ``members`` per problem and class."""

    row: IntArray
    col: IntArray
    by_link: IntArray
    cap: FloatArray
    link_comp: IntArray
    comp: IntArray
    bits: IntArray
    cls_cap: FloatArray
    members: FloatArray


@dataclass
class _Links:
    """The links still in play in a solve, numbered problem by problem: capacity, residual, unfrozen flows
    (``counts``), problem, their entries' range in ``by_link`` order, and where each problem's links start."""

    cap: FloatArray
    residual: FloatArray
    counts: FloatArray
    comp: IntArray
    start: IntArray
    length: IntArray

    @property
    def starts(self) -> IntArray:
        out: IntArray = np.flatnonzero(np.diff(self.comp, prepend=-1))
        return out

    def compact(self, keep: NDArray[np.bool_], col: IntArray) -> IntArray:
        """Keep the links ``keep`` marks; returns ``col`` renumbered (-1: a dropped link)."""
        renumber = np.cumsum(keep) - 1
        for name in ("cap", "residual", "counts", "comp", "start", "length"):
            setattr(self, name, getattr(self, name)[keep])
        out: IntArray = np.where(keep[col], renumber[col], -1)
        return out


def _class_flows(s: _Solve, tight: NDArray[np.bool_], comp_start: IntArray, comp_len: IntArray) -> IntArray:
    """The flows (frozen or not) in the classes ``tight`` marks (problems x classes): a problem's flows are a
    range (numbered problem by problem), each with its class bits."""
    hit = np.flatnonzero(tight.any(axis=1))
    cand = _ranges(comp_start[hit], comp_len[hit])
    out: IntArray = cand[(s.bits[cand] & (tight @ (1 << np.arange(s.cls_cap.size)))[s.comp[cand]]) != 0]
    return out


def _rates(s: _Solve, n_comp: int) -> FloatArray:
    """:func:`slowlink.sim.engine.max_min_rates` of every problem of ``s`` at once, round by round: each problem
    fills with its own step, exactly as alone (the unfrozen counts are whole numbers, kept up to date by
    subtracting the flows each round freezes); a round costs the links in play plus the entries it freezes."""
    n_flows, row, col = s.comp.size, s.row, s.col
    rates = np.full(n_flows, np.inf)  # a flow on no link: infinite
    flow_start, flow_len = np.searchsorted(row, np.arange(n_flows)), np.bincount(row, minlength=n_flows)
    link_len = np.bincount(col, minlength=s.cap.size)
    ln = _Links(s.cap, s.cap.copy(), link_len.astype(np.float64), s.link_comp, np.cumsum(link_len) - link_len,
                link_len)
    comp_start, comp_len = np.searchsorted(s.comp, np.arange(n_comp)), np.bincount(s.comp, minlength=n_comp)
    frozen = (flow_len == 0) & (s.bits == 0)
    cls_res, members = np.broadcast_to(s.cls_cap, s.members.shape).copy(), s.members.copy()
    seen = np.zeros(n_flows, dtype=np.int64)  # scratch: a flow's last position in this round's list
    acc, left, starts, active = np.zeros(n_comp), int((~frozen).sum()), ln.starts, ln.counts > 0
    while left:
        share = np.divide(ln.residual, ln.counts, out=np.full(ln.cap.size, np.inf), where=active)
        step = np.full(n_comp, np.inf)
        if starts.size:
            step[ln.comp[starts]] = np.minimum.reduceat(share, starts)
        cls_on = members > 0
        cls_share = np.where(cls_on, cls_res, np.inf)  # a class is one flow's link: its share is its residual
        step = np.minimum(step, cls_share.min(axis=1, initial=np.inf))
        going = np.isfinite(step)
        acc[going] += step[going]
        comp_step = np.where(going, step, 0.0)
        ln.residual -= comp_step[ln.comp] * ln.counts
        cls_res -= comp_step[:, None] * cls_on
        lim = comp_step * _TIE
        tight = np.flatnonzero(active & ((ln.residual <= _REL_EPS * ln.cap) | (share <= lim[ln.comp])))
        flows = row[s.by_link[_ranges(ln.start[tight], ln.length[tight])]]
        cls_tight = cls_on & ((cls_res <= _REL_EPS * s.cls_cap) | (cls_share <= lim[:, None]))
        if cls_tight.any():
            flows = np.concatenate((flows, _class_flows(s, cls_tight, comp_start, comp_len)))
        flows = flows[~frozen[flows]]
        seen[flows] = np.arange(flows.size)
        flows = flows[seen[flows] == np.arange(flows.size)]  # each once
        frozen[flows], left, rates[flows] = True, left - flows.size, acc[s.comp[flows]]
        np.subtract.at(ln.counts, col[_ranges(flow_start[flows], flow_len[flows])], 1.0)
        for k in range(s.cls_cap.size):
            members[:, k] -= np.bincount(s.comp[flows[(s.bits[flows] >> k) & 1 == 1]], minlength=n_comp)
        active = ln.counts > 0
        if np.count_nonzero(active) * 2 < ln.cap.size:  # drop the links no unfrozen flow uses, now and then
            col = ln.compact(active, col)  # entries of frozen flows only lose their link
            starts, active = ln.starts, ln.counts > 0
    return rates


@dataclass(frozen=True)
class _Phase:
    """The phase after merging links with the same users (flows numbered problem by problem, ``comp`` each):
    entries (``row`` ascending, ``col``) on the links two or more flows cross, those links numbered problem by
    problem (``cap``, ``link_comp``, their class ``cls_of_link``: their capacity's index in ``cls_cap``), the
    entries' order by link, and per flow the classes of the links it alone crosses (``bits``)."""

    row: IntArray
    col: IntArray
    by_link: IntArray
    cap: FloatArray
    link_comp: IntArray
    cls_of_link: IntArray
    comp: IntArray
    bits: IntArray
    cls_cap: FloatArray


def _classes(cap: FloatArray) -> tuple[FloatArray, IntArray]:
    """The capacities that form classes (the ``_MAX_CLASSES`` most common: a flow's classes are bits of an
    int64) and each link's class (-1: none, the link stays a link even when one flow crosses it)."""
    cls_cap, cls_all = np.unique(cap, return_inverse=True)
    if cls_cap.size <= _MAX_CLASSES:
        return cls_cap, cls_all
    top = np.sort(np.argsort(-np.bincount(cls_all), kind="stable")[:_MAX_CLASSES])
    index = np.full(cls_cap.size, -1, dtype=np.int64)
    index[top] = np.arange(top.size)
    return cls_cap[top], index[cls_all]


def _phase(inc: sp.csr_matrix, cap_all: FloatArray, comp_of_flow: IntArray) -> tuple[_Phase, IntArray]:
    """The phase's arrays (:class:`_Phase`) and its flows' order (problem by problem)."""
    n = inc.shape[0]
    flow_order = np.argsort(comp_of_flow, kind="stable")
    new_of = np.empty(n, dtype=np.int64)
    new_of[flow_order] = np.arange(n)
    row = new_of[np.repeat(np.arange(n), np.diff(inc.indptr))]
    col = inc.indices.astype(np.int64)
    col = same_users(row, col, cap_all)[col]
    n_all = cap_all.size
    key = np.unique(row * n_all + col)  # one entry per flow and (merged) link, flows ascending
    row, col = key // n_all, key % n_all
    comp = comp_of_flow[flow_order]
    cls_cap, cls_all = _classes(cap_all)
    alone = (np.bincount(col, minlength=n_all)[col] == 1) & (cls_all[col] >= 0)
    bits = np.zeros(n, dtype=np.int64)
    np.bitwise_or.at(bits, row[alone], 1 << cls_all[col[alone]])
    row, col = row[~alone], col[~alone]
    used = np.unique(col)
    link_comp = np.zeros(n_all, dtype=np.int64)
    link_comp[col] = comp[row]
    used = used[np.argsort(link_comp[used], kind="stable")]
    remap = np.empty(n_all, dtype=np.int64)
    remap[used] = np.arange(used.size)
    col = remap[col]
    return _Phase(row, col, np.argsort(col, kind="stable"), cap_all[used], link_comp[used], cls_all[used], comp,
                  bits, cls_cap), flow_order


def _solve_of(ph: _Phase, done: NDArray[np.bool_], n_comp: int) -> _Solve:
    """The solve of the flows not ``done``: links with two or more of them stay links, the others are classes."""
    keep = ~done[ph.row]
    users = np.bincount(ph.col[keep], minlength=ph.cap.size)
    on = (users >= 2) | ((users == 1) & (ph.cls_of_link < 0))  # links that stay links in this solve
    shared = keep & on[ph.col]
    alone = np.flatnonzero(keep & ~shared)
    pos = np.cumsum(~done) - 1  # flow -> position among the unfinished ones
    comp, bits = ph.comp[~done], ph.bits[~done]
    np.bitwise_or.at(bits, pos[ph.row[alone]], 1 << ph.cls_of_link[ph.col[alone]])
    members = np.zeros((n_comp, ph.cls_cap.size))
    for k in range(ph.cls_cap.size):
        members[:, k] = np.bincount(comp[(bits >> k) & 1 == 1], minlength=n_comp)
    renumber = np.cumsum(on) - 1
    entry = np.cumsum(shared) - 1  # entry -> position among the kept ones
    by_link = entry[ph.by_link[shared[ph.by_link]]]
    return _Solve(pos[ph.row[shared]], renumber[ph.col[shared]], by_link, ph.cap[on], ph.link_comp[on], comp,
                  bits, ph.cls_cap, members)


def component_drains(inc: sp.csr_matrix, size_bytes: FloatArray, capacity_bytes_s: FloatArray,
                     comp_of_flow: IntArray, n_comp: int) -> FloatArray:
    """Per problem, the time its last flow drains: flows (rows of the 0/1 flow x link ``inc``) that all start
    at 0 with no ``after``, in independent problems (``comp_of_flow``; problems share no link), each run on its
    own clock exactly as :func:`slowlink.sim.engine.simulate` runs it alone (the same events and the same
    arithmetic), all problems advanced together (module docstring)."""
    present, comp_of_flow = np.unique(comp_of_flow, return_inverse=True)  # problems with flows, renumbered
    n_comp, n_all = present.size, n_comp
    ph, flow_order = _phase(inc, np.asarray(capacity_bytes_s, dtype=np.float64), comp_of_flow)
    size = np.asarray(size_bytes, dtype=np.float64)[flow_order]
    n = size.size
    remaining = size.copy()
    drain = np.zeros(n)
    done = remaining <= 0  # finished at 0
    t = np.zeros(n_comp)
    while not done.all():
        idx = np.flatnonzero(~done)
        rates = _rates(_solve_of(ph, done, n_comp), n_comp)
        cf = ph.comp[idx]
        with np.errstate(divide="ignore", invalid="ignore"):
            ttf = np.where(rates > 0, remaining[idx] / rates, np.inf)
        first = np.full(n_comp, np.inf)
        np.minimum.at(first, cf, ttf)
        t_next = t + first
        dt = t_next - t
        finite = np.where(np.isinf(rates), 0.0, rates)
        remaining[idx] -= np.where(np.isinf(rates), remaining[idx], finite * dt[cf])
        fin = (remaining[idx] <= _REL_EPS * size[idx]) | (ttf <= dt[cf] * (1 + 1e-12))
        drain[idx[fin]] = t_next[cf[fin]]
        done[idx[fin]] = True
        moving = np.isfinite(first)
        t[moving] = t_next[moving]
    out = np.zeros(n_all)
    np.maximum.at(out, present[ph.comp], drain)
    return out
