"""A flow-level network engine: max-min fair sharing by progressive filling, event by event.

It knows links (capacity in bytes/s, latency in s) and flows (a path of link ids, a size in bytes, a start
time, optional predecessors) and nothing of GPUs, collectives or topologies.

Model (and its shortcuts, each stated):

* Between two events (a flow arrival or a flow's last byte leaving) every active flow has a constant rate,
  the max-min fair allocation computed by progressive filling (Bertsekas & Gallager, *Data Networks*,
  section 6.5.2): raise all unfrozen flows' rates equally until a link saturates, freeze the flows that
  cross it, repeat. Vectorised over a flow x link incidence matrix (``scipy.sparse``); each round
  freezes at least one link, so a solve costs at most ``links`` rounds of two sparse products.
* Shortcut 1, latency: a flow's bytes start to drain at its start and its finish is the time the last
  byte leaves plus the sum of its path's link latencies plus its own ``delay_s`` (store-and-forward of one
  byte, no pipelining delay, no slow start, no congestion-control transient). Latency never occupies
  bandwidth.
* Shortcut 2, fluid: no packets, no queues, no drops; a link is never loaded above its capacity.
* Shortcut 3, numerical: a flow whose remaining bytes fall below ``1e-9`` of its size is finished.
* Dependencies: a flow with ``after`` starts at ``max(start_s, finish of every flow in after)``; this is
  how a caller chains ring steps or phases without the engine knowing what they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
_REL_EPS = 1e-9


@dataclass(frozen=True)
class Flow:
    """A transfer of ``size_bytes`` along ``path`` (link ids, in order), ready at ``start_s``.

    ``after`` lists indices (in the same flow list) of flows that must finish first; ``delay_s`` is a
    fixed time added to the finish (e.g. per-hop software latency the caller folds into one flow).
    """

    path: tuple[int, ...]
    size_bytes: float
    start_s: float = 0.0
    tag: str = ""
    after: tuple[int, ...] = ()
    delay_s: float = 0.0


@dataclass(frozen=True)
class SimResult:
    """What a run produced: per-flow times, per-link bytes and the utilisation timeline.

    ``segments_s`` has the boundaries of the constant-rate intervals (length k+1); ``link_rate_bytes_s``
    is k x links (the load of each link in each interval), kept only when it is small enough
    (``k * links <= timeline_limit``), else ``None``. ``peak_utilisation`` is kept in every case.
    """

    start_s: FloatArray
    finish_s: FloatArray
    drain_s: FloatArray
    link_bytes: FloatArray
    link_capacity_bytes_s: FloatArray
    peak_utilisation: FloatArray
    segments_s: FloatArray
    link_rate_bytes_s: FloatArray | None
    events: int
    tags: tuple[str, ...] = field(default=())

    @property
    def makespan_s(self) -> float:
        return float(self.finish_s.max() - self.start_s.min()) if self.finish_s.size else 0.0

    @property
    def end_s(self) -> float:
        return float(self.finish_s.max()) if self.finish_s.size else 0.0

    def busy_utilisation(self) -> FloatArray:
        """Per-link bytes / (capacity x time the simulation ran)."""
        span = max(self.end_s - float(self.start_s.min(initial=0.0)), 1e-300)
        return self.link_bytes / (self.link_capacity_bytes_s * span)


def max_min_rates(incidence: sp.csr_matrix, capacity: FloatArray) -> FloatArray:
    """Max-min fair rates of the flows (rows of ``incidence``) on links of ``capacity`` (columns).

    Progressive filling: with ``n_l`` unfrozen flows on link ``l`` and residual ``r_l``, every unfrozen
    flow gains ``min_l r_l / n_l``; links reaching zero residual freeze their flows. A flow on no link
    (an empty path) gets an infinite rate. An entry of ``incidence`` above 1 counts that many flows (a class of
    identical flows in one row). Each round works on the flows still unfrozen and the links they use only (the
    others can no longer bind), so a round costs what is left of the problem.
    """
    n_flows = incidence.shape[0]
    rates = np.zeros(n_flows)
    if n_flows == 0:
        return rates
    rates[np.diff(incidence.indptr) == 0] = np.inf
    # the unfrozen flows' entries (flow, link, flows it counts), shrunk as flows freeze and links die
    row = np.repeat(np.arange(n_flows), np.diff(incidence.indptr))
    col, count = incidence.indices.astype(np.int64), incidence.data.astype(np.float64)
    cap = capacity.astype(np.float64)
    residual = cap.copy()
    alive = np.ones(cap.size, dtype=bool)
    acc = 0.0  # what every unfrozen flow has gained so far
    while row.size:
        counts = np.bincount(col, count, minlength=cap.size)
        active = (counts > 0) & alive
        if not active.any():
            break
        share = np.full(cap.size, np.inf)
        share[active] = residual[active] / counts[active]
        step = float(share.min())
        acc += step
        residual -= step * counts
        tight = active & ((residual <= _REL_EPS * cap) | (share <= step * (1 + 1e-12)))
        alive &= ~tight
        frozen = np.zeros(n_flows, dtype=bool)
        frozen[row[tight[col]]] = True
        rates[frozen] = acc
        keep = ~frozen[row]
        row, col, count = row[keep], col[keep], count[keep]
    rates[np.unique(row)] = acc
    return rates


def _rates(sub: sp.csr_matrix, cap: FloatArray) -> FloatArray:
    """Max-min rates on the links the active flows use only (the others cannot bind)."""
    used = np.zeros(cap.size, dtype=bool)
    used[sub.indices] = True
    if used.all():
        return max_min_rates(sub, cap)
    cols = np.flatnonzero(used)
    remap = np.full(cap.size, -1, dtype=np.int64)
    remap[cols] = np.arange(cols.size)
    small = sp.csr_matrix((sub.data, remap[sub.indices], sub.indptr), shape=(sub.shape[0], cols.size))
    return max_min_rates(small, cap[cols])


def _incidence(paths: list[tuple[int, ...]], n_links: int) -> sp.csr_matrix:
    lengths = np.fromiter((len(p) for p in paths), dtype=np.int64, count=len(paths))
    rows = np.repeat(np.arange(len(paths)), lengths)
    cols = np.fromiter((link for p in paths for link in p), dtype=np.int64, count=int(lengths.sum()))
    data = np.ones(cols.size)
    m = sp.csr_matrix((data, (rows, cols)), shape=(len(paths), n_links))
    m.sum_duplicates()
    m.data[:] = 1.0  # a path that crosses a link twice still takes one share of it (shortcut)
    return m


def _dependents(flows: list[Flow]) -> tuple[NDArray[np.int64], sp.csr_matrix]:
    """Per flow: how many predecessors it waits for, and a predecessor -> dependent matrix."""
    n = len(flows)
    src = [p for f in flows for p in f.after]
    dst = [i for i, f in enumerate(flows) for _ in f.after]
    if any(not 0 <= p < n for p in src):
        raise ValueError("a flow's after lists an index outside the flow list")
    m = sp.csr_matrix((np.ones(len(src)), (src, dst)), shape=(n, n))
    waits = np.fromiter((len(f.after) for f in flows), dtype=np.int64, count=n)
    return waits, m


def simulate(
    capacity_bytes_s: FloatArray | list[float],
    latency_s: FloatArray | list[float],
    flows: list[Flow],
    *,
    timeline_limit: int = 2_000_000,
) -> SimResult:
    """Run ``flows`` over links of the given capacities and latencies to completion."""
    cap = np.asarray(capacity_bytes_s, dtype=np.float64)
    lat = np.asarray(latency_s, dtype=np.float64)
    if cap.shape != lat.shape or (cap <= 0).any():
        raise ValueError("every link needs a capacity > 0 and a latency")
    n = len(flows)
    inc = _incidence([f.path for f in flows], cap.size)
    size = np.array([f.size_bytes for f in flows], dtype=np.float64)
    start = np.array([f.start_s for f in flows], dtype=np.float64)
    tail = (inc @ lat if n else np.zeros(0)) + np.array([f.delay_s for f in flows], dtype=np.float64)
    waits, deps = _dependents(flows)
    ready = start.copy()
    ready[waits > 0] = np.inf
    remaining = size.copy()
    drain = np.full(n, np.nan)
    done = np.zeros(n, dtype=bool)
    link_bytes = np.zeros(cap.size)
    peak = np.zeros(cap.size)
    seg_t: list[float] = []
    seg_rates: list[FloatArray] = []
    keep_timeline = True
    t = float(ready.min()) if n and np.isfinite(ready).any() else 0.0
    events = 0

    def finish(idx: NDArray[np.int64], at: float) -> None:
        remaining[idx] = 0.0
        drain[idx] = at
        done[idx] = True
        if deps.nnz and idx.size:
            sub = deps[idx]
            hit = sub.tocoo()
            ends = (drain[idx] + tail[idx])[hit.row]
            np.subtract.at(waits, hit.col, 1)
            latest = np.full(n, -np.inf)
            np.maximum.at(latest, hit.col, ends)
            touched = np.unique(hit.col)
            start[touched] = np.maximum(start[touched], latest[touched])
            released = touched[waits[touched] == 0]
            ready[released] = start[released]

    zero = np.flatnonzero((remaining <= 0) & (waits == 0))
    finish(zero, t)
    while not done.all():
        pending = ~done
        active = pending & (ready <= t * (1 + 1e-15) + 1e-300)
        idx = np.flatnonzero(active)
        zero = idx[remaining[idx] <= 0]
        if zero.size:
            finish(zero, t)
            continue
        rates = _rates(inc[idx], cap) if idx.size else np.zeros(0)
        future = ready[pending & ~active]
        next_arrival = float(future.min()) if future.size else np.inf
        with np.errstate(divide="ignore"):
            ttf = np.where(rates > 0, remaining[idx] / rates, np.inf)
        next_finish = t + float(ttf.min()) if idx.size else np.inf
        t_next = min(next_arrival, next_finish)
        if not np.isfinite(t_next):
            raise ValueError("flows wait on each other in a cycle (after) and can never start")
        dt = t_next - t
        finite = np.where(np.isinf(rates), 0.0, rates)
        load = inc[idx].T @ finite if idx.size else np.zeros(cap.size)
        link_bytes += load * dt
        peak = np.maximum(peak, load / cap)
        if keep_timeline:
            seg_t.append(t)
            seg_rates.append(load)
            keep_timeline = len(seg_rates) * cap.size <= timeline_limit
        remaining[idx] -= np.where(np.isinf(rates), remaining[idx], finite * dt)
        finish(idx[(remaining[idx] <= _REL_EPS * size[idx]) | (ttf <= dt * (1 + 1e-12))], t_next)
        t = t_next
        events += 1
    seg_t.append(t)
    timeline = np.vstack(seg_rates) if keep_timeline and seg_rates else None
    return SimResult(
        start_s=start, finish_s=drain + tail, drain_s=drain, link_bytes=link_bytes,
        link_capacity_bytes_s=cap, peak_utilisation=peak, segments_s=np.array(seg_t),
        link_rate_bytes_s=timeline, events=events, tags=tuple(f.tag for f in flows),
    )
