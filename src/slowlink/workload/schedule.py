"""The pipeline schedule as Megatron-Core runs it, op by op: each rank's fixed order of chunk forwards and backwards,
each op waiting for its input from the neighbouring virtual stage. Used for the pipeline's time beyond m x its slowest
rank's micro-batch (the bubble), where the closed form (pp - 1) / vp x a stage's micro-batch assumes equal chunks
and instant hops; with unequal chunks the steady state itself can wait (a heavy chunk stalls its neighbours each
round). The same order gives each rank's peak of chunk activations held (:func:`peak_in_flight`, for the memory
model), and :func:`stage_layers` the layers each stage holds.

Order (Megatron-Core core_r0.10.0 ``pipeline_parallel/schedules.py``):
  interleaved (vp > 1, ``forward_backward_pipelining_with_interleaving``): the virtual micro-batches follow a
      table built from groups of ``microbatch_group_size_per_vp_stage`` (= pp, its default) micro-batches, chunk
      by chunk inside a group, the last group holding the remainder (l.718-760); a backward runs the table's
      chunk reversed (``get_model_chunk_id``, l.764-769); rank r first runs (pp - r - 1) x 2 + (vp - 1) x pp
      forwards (l.692-697, capped at the total), then one forward and one backward per step, then the remaining
      backwards;
  1F1B (vp = 1, ``forward_backward_pipelining_without_interleaving``): rank r runs pp - r - 1 forwards
      (l.1669-1674), then one forward and one backward per step, then the remaining backwards.
Dependencies: a forward of chunk c on rank r needs rank r - 1's forward of the same micro-batch and chunk (rank 0:
rank pp - 1's of chunk c - 1); a backward needs rank r + 1's backward (the last rank: rank 0's of chunk c + 1, or,
for the last chunk, its own forward's loss); crossing ranks costs one hop. An op starts when its rank is free and
its input has arrived (list scheduling in each rank's order).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from slowlink.errors import InfeasiblePlan
from slowlink.spec.workload import Workload

Op = tuple[str, int, int]  # ("F" | "B", model chunk, micro-batch)


def rank_schedule(pp: int, vp: int, m: int, rank: int) -> list[Op]:
    """Rank ``rank``'s ops in Megatron-Core's order (module docstring), ``m`` micro-batches (interleaved: a multiple
    of pp, as Megatron-Core requires and :func:`~slowlink.workload.step.check_plan` checks; another m leaves a
    partial last group whose dependencies this order cannot meet)."""
    if vp == 1:
        order = [(k, 0) for k in range(m)]
        warm = min(pp - rank - 1, m)
    else:
        order = []
        for low in range(0, m, pp):  # groups of pp micro-batches, the last one the remainder
            high = m if low + pp >= m else low + pp
            order += [(mb, c) for c in range(vp) for mb in range(low, high)]
        warm = min((pp - rank - 1) * 2 + (vp - 1) * pp, m * vp)
    total = len(order)

    def fwd(k: int) -> Op:
        mb, c = order[k]
        return ("F", c, mb)

    def bwd(k: int) -> Op:
        mb, c = order[k]
        return ("B", vp - 1 - c, mb)

    ops = [fwd(k) for k in range(warm)]
    for k in range(total - warm):
        ops += [fwd(k + warm), bwd(k)]
    return ops + [bwd(k) for k in range(total - warm, total)]


def stage_layers(w: Workload) -> tuple[int, int, int]:
    """(first, middle, last) stage layer counts; raise when the stages do not divide the layers."""
    p, n = w.parallel, w.model.layers
    first = p.first_stage_layers
    last = p.last_stage_layers
    inner_stages = p.pp - (first is not None) - (last is not None)
    rest = n - (first or 0) - (last or 0)
    if inner_stages <= 0 or rest % (inner_stages * p.vp):
        fixed = [f"{k} ({v})" for k, v in (("parallel.first_stage_layers", first), ("parallel.last_stage_layers", last))
                 if v is not None]
        held = f"model.layers ({n}) minus {' and '.join(fixed)} = {rest} layers" if fixed else \
            f"model.layers ({n})"
        over = f"{max(inner_stages, 0)} stages" + (f" x vp ({p.vp})" if p.vp > 1 else "")
        hint = f": pp ({p.pp}) is more stages than layers" if p.pp > n else ""
        raise InfeasiblePlan(f"parallel: {held} must split evenly over {over}{hint}", rule="pp_divides_layers")
    mid = rest // inner_stages
    return (first if first is not None else mid, mid, last if last is not None else mid)


def rank_layers(layers: tuple[int, int, int], pp: int, rank: int) -> int:
    """The layers pipeline rank ``rank`` holds, of :func:`stage_layers`' (first, middle, last)."""
    return layers[0] if rank == 0 else layers[2] if rank == pp - 1 else layers[1]


def peak_in_flight(pp: int, vp: int, m: int, rank: int) -> int:
    """The most model-chunk forwards whose backward has not run yet that ``rank`` holds at once, in
    :func:`rank_schedule`'s order: the chunk activations its memory keeps at its peak (the first rank: pp micro-batches
    of 1F1B, pp + (pp - 1) / vp stages' worth interleaved; the last rank: one 1F1B micro-batch). The peak comes by the
    first steady-state forward, within the first 4 pp micro-batches, whose order more micro-batches do not change."""
    return _peak_in_flight(pp, vp, min(m, 4 * pp), rank)


@lru_cache(maxsize=1024)
def _peak_in_flight(pp: int, vp: int, m: int, rank: int) -> int:
    held = peak = 0
    for kind, _, _ in rank_schedule(pp, vp, m, rank):
        held += 1 if kind == "F" else -1
        peak = max(peak, held)
    return peak


def makespan_s(pp: int, vp: int, m: int, op_s: Callable[[str, int, int], float], hop_s: float) -> float:
    """Seconds from the first forward to the last backward: every rank runs :func:`rank_schedule`, an op of
    ``op_s(kind, rank, chunk)`` seconds starting when its rank is free and its input is in (module docstring)."""
    kinds = _dag(pp, vp, m)[5]
    return _makespan(pp, vp, m, tuple(op_s(*k) for k in kinds), hop_s)


@lru_cache(maxsize=1024)
def _makespan(pp: int, vp: int, m: int, seconds: tuple[float, ...], hop_s: float) -> float:
    """:func:`makespan_s` with each distinct op's seconds in ``_dag``'s kind order (cached: re-planning one layout,
    as advice and sweeps over other knobs do, costs nothing)."""
    order, rank_prev, dep, cross, key, _ = _dag(pp, vp, m)
    dur = [seconds[k] for k in key]
    end = [0.0] * len(order)
    for i in order:
        t = end[rank_prev[i]] if rank_prev[i] >= 0 else 0.0
        if dep[i] >= 0:
            u = end[dep[i]] + (hop_s if cross[i] else 0.0)
            t = u if u > t else t
        end[i] = t + dur[i]
    return max(end)


@lru_cache(maxsize=256)
def _dag(pp: int, vp: int, m: int) -> tuple[list[int], list[int], list[int], list[bool], list[int], list[Op]]:
    """The schedule's ops as a graph, once per (pp, vp, m): a topological order, each op's predecessor on its
    rank and the op its input comes from (-1: none), whether that input crosses ranks, and the index of its
    (kind, rank, chunk) in the distinct ones (the last list)."""
    lists = [rank_schedule(pp, vp, m, r) for r in range(pp)]
    ids: dict[tuple[str, int, int, int], int] = {}
    keys: list[tuple[str, int, int]] = []
    rank_prev: list[int] = []
    for r, ops in enumerate(lists):
        for j, (kind, c, mb) in enumerate(ops):
            ids[(kind, r, c, mb)] = len(keys)
            keys.append((kind, r, c))
            rank_prev.append(len(keys) - 2 if j else -1)
    dep, cross = [-1] * len(keys), [False] * len(keys)
    for (kind, r, c, mb), i in ids.items():
        src = _input(kind, r, c, mb, pp, vp)
        if src is not None:
            dep[i], cross[i] = ids[src], src[1] != r
    order: list[int] = []
    placed, nxt, base = [False] * len(keys), [0] * pp, [0] * pp
    for r in range(1, pp):
        base[r] = base[r - 1] + len(lists[r - 1])
    while len(order) < len(keys):
        moved = False
        for r in range(pp):
            while nxt[r] < len(lists[r]):
                i = base[r] + nxt[r]
                if dep[i] >= 0 and not placed[dep[i]]:
                    break
                order.append(i)
                placed[i] = True
                nxt[r] += 1
                moved = True
        if not moved:  # every rank waits on an op no rank will run: the order above is wrong
            raise RuntimeError(f"pipeline schedule deadlock (pp {pp}, vp {vp}, {m} micro-batches)")
    kinds = sorted(set(keys))
    index = {k: j for j, k in enumerate(kinds)}
    return order, rank_prev, dep, cross, [index[k] for k in keys], kinds


def _input(kind: str, r: int, c: int, mb: int, pp: int, vp: int) -> tuple[str, int, int, int] | None:
    """The op whose output ``(kind, r, c, mb)`` waits for (module docstring), None for the first forward."""
    if kind == "F":
        if r > 0:
            return ("F", r - 1, c, mb)
        return ("F", pp - 1, c - 1, mb) if c > 0 else None
    if r < pp - 1:
        return ("B", r + 1, c, mb)
    return ("B", 0, c + 1, mb) if c < vp - 1 else ("F", r, c, mb)


def pipeline_s(pp: int, vp: int, m: int, op_s: Callable[[str, int, int], float], hop_s: float) -> float:
    """:func:`makespan_s` of ``m`` micro-batches. Once the pipeline is full the schedule repeats: every pp
    micro-batches on the interleaved table; in 1F1B, op times that differ by rank can give a period of 2 or
    pp - 1. So above 4 pp the schedule is run for m1 in [2 pp, 4 pp) with m1 = m modulo 2 pp, and for m1 + 2 pp,
    and extended by (m - m1) / (2 pp) of their difference: exact for a period dividing 2 pp (the interleaved
    schedule, tested), otherwise within one period's ripple (0.2% at most in the tests), at under 24 vp pp^2 ops
    whatever the batch."""
    if m <= 4 * pp:
        return makespan_s(pp, vp, m, op_s, hop_s)
    window = 2 * pp
    m1 = window + (m - window) % window
    t1 = makespan_s(pp, vp, m1, op_s, hop_s)
    return t1 + (m - m1) // window * (makespan_s(pp, vp, m1 + window, op_s, hop_s) - t1)


def bubble_ratio(schedule: str, pp: int, forward_s: float, backward_s: float, wgrad_s: float) -> float:
    """The bubble of ``schedule`` over 1F1B's at ``pp`` stages, one chunk each, from DeepSeek-V3's Table 2 (arXiv
    2412.19437, Sec. 3.2.1; F a forward chunk, B a full backward chunk, W its weight-gradient part):
      1f1b         (PP - 1)(F + B)
      zero-bubble  (PP - 1)(F + B - 2W)      ZB-H1 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", Sec. 3:
                                            (p - 1)(T_F + T_B - T_W) with T_B the input gradient alone)
      dualpipe     (PP/2 - 1)(F&B + B - 3W)  F&B a forward and a backward chunk run together, F + B of compute
                                            (what the pair overlaps is communication)
    ``forward_s``, ``backward_s``, ``wgrad_s``: F, B and W of any one chunk (the ratio does not depend on its size).
    """
    base = (pp - 1) * (forward_s + backward_s)
    if schedule == "1f1b" or base <= 0.0:
        return 1.0
    if schedule == "zero-bubble":
        return max(0.0, (pp - 1) * (forward_s + backward_s - 2.0 * wgrad_s)) / base
    if schedule == "dualpipe":
        return max(0.0, (pp / 2 - 1) * (forward_s + 2.0 * backward_s - 3.0 * wgrad_s)) / base
    raise ValueError(f"schedule ({schedule!r}) must be 1f1b, zero-bubble or dualpipe")
