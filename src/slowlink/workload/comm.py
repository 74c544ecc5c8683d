"""Communication per step and per parallel dimension, with the groups placed on the real cluster.

Groups come from :func:`slowlink.workload.placement.dimension_groups` (``parallel.order``, tp fastest) and
are priced by a :data:`CommCost`: the analytical default goes through :func:`slowlink.collectives.predict`,
the flow simulator (``slowlink.sim.step.flow_cost``) plugs in the same way. Volumes, per micro-batch and
per layer unless said otherwise (b sequences, s tokens, h hidden, activations in 2 bytes, 4 in fp32):
  TP: with SP 2 all-gathers + 2 reduce-scatters of b*s*h/cp bytes forward and as many backward, else
      2 all-reduces each way; full recompute repeats the forward ones (Korthikanti et al. 2022, Sec. 4.2).
  CP: ring attention passes K and V (2*b*(s/cp)*h_kv/tp values) cp-1 times forward, K, V, dK, dV
      backward (Liu et al. 2023, Ring Attention); each hop hides behind one block of attention. cp_impl
      all_gather: one all-gather of the full K, V forward and one reduce-scatter of dK, dV backward.
  EP: dispatch + combine all_to_all of b*s/cp*top_k*h (/tp with SP) bytes forward and backward, per MoE layer;
      with TP > 1 the dispatcher's all-gather / reduce-scatter of those rows over TP (tp x that size).
  PP: send_recv of b*s*h/cp (/tp, scatter/gather or SP) forward and backward, per virtual stage.
  DP (per step): all-reduce of the gradients (ZeRO 0), or reduce-scatter (all-reduce with
      zero1_grad_reduce: all_reduce) + all-gather of the parameters (ZeRO 1/2); ZeRO 3 also all-gathers
      the parameters forward and backward each micro-batch.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Sequence
from typing import overload

import numpy as np

from slowlink.collectives import Group, Prediction, predict
from slowlink.collectives.communicator import communicator, patterns_of, shifts_apply
from slowlink.spec.cluster import Cluster
from slowlink.spec.workload import Parallel
from slowlink.workload.placement import Dimension, dimension_array

CommCost = Callable[[str, float, Sequence[list[int]]], float]
# (op, size_bytes in the nccl-tests convention, groups = every concurrent communicator of that
#  dimension as lists of RANKS) -> seconds until all of them finish. op in all_reduce, all_gather,
#  reduce_scatter, all_to_all, send_recv; for send_recv each group is [src_rank, dst_rank].

_Key = tuple[int, int, int, int, int, str]


class Groups(Sequence[list[int]]):
    """Every communicator of one dimension: a read-only (groups, size) array of ranks, each row sorted, named by
    ``key`` (the layout and dimension they were made from: a value that identifies them without reading every
    rank, :func:`group_shape`). Indexing gives lists of ranks, made on demand, so a caller that reads one group
    (the analytical model places the array as it is, ``np.asarray(groups)``) pays for that group only.

    ``base`` with ``copies`` or ``runs`` > 1 (:func:`_split`: a smaller layout's groups, the fastest dimension's
    ranks factored out): the groups are ``base``'s rows, each followed by ``copies - 1`` copies with every rank
    shifted by 1, 2, ... (a dimension that does not run along the fastest one, e.g. DP beside TP), or with ``runs -
    1`` more members after each member, shifted so (one that does, e.g. TP). The array itself is then made only
    when read (``make``), so a model that prices the groups from ``base`` (:meth:`within` a node's GPUs,
    :func:`~slowlink.collectives.communicator.shifts_apply`) never builds it."""

    __slots__ = ("_array", "_lists", "_make", "_within", "base", "copies", "key", "runs", "shape")

    def __init__(self, make: Callable[[], np.ndarray], shape: tuple[int, int], key: tuple[_Key, str],
                 base: np.ndarray | None = None, copies: int = 1, runs: int = 1) -> None:
        self._make = make
        self._array: np.ndarray | None = None
        self.shape = shape
        self.key = key
        self.base = base
        self.copies = copies
        self.runs = runs
        self._lists: list[list[int]] | None = None
        self._within: dict[int, tuple[np.ndarray, int, int] | None] = {}

    @property
    def array(self) -> np.ndarray:
        """The (groups, size) array, made once, in memory order and read-only (shared by every caller)."""
        if self._array is None:
            made = np.ascontiguousarray(self._make())  # rows in memory order: every later pass over them is faster
            made.setflags(write=False)
            self._array = made
        return self._array

    def __len__(self) -> int:
        return self.shape[0]

    @overload
    def __getitem__(self, i: int) -> list[int]: ...

    @overload
    def __getitem__(self, i: slice) -> list[list[int]]: ...

    def __getitem__(self, i: int | slice) -> list[int] | list[list[int]]:
        if self._array is None and self.base is not None and self.runs > 1:  # from base, the array not made
            rows = self.base[i]
            out: list[int] | list[list[int]] = \
                (rows[..., None] + np.arange(self.runs)).reshape(*rows.shape[:-1], -1).tolist()
        else:
            out = self.array[i].tolist()
        return out

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.lists())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and self.lists() == [list(g) for g in other]

    __hash__ = None  # type: ignore[assignment]  # a sequence of lists, compared by value like one

    def __array__(self, dtype: np.dtype | None = None, copy: bool | None = None) -> np.ndarray:
        return self.array if dtype is None else self.array.astype(dtype, copy=False)

    def within(self, unit: int) -> tuple[np.ndarray, int, int] | None:
        """(base, copies, runs) with shifts of fewer than ``unit`` ranks, or None (no base, or ``unit`` shares no
        factor with the shifts). Shifts of ``k`` ranks are those of ``g = gcd(k, unit)``: copies ``x`` = ``g * i +
        j`` of a group are copies ``j`` of its copy ``g * i``, and a member's run of ``k`` is ``k / g`` runs of ``g``.
        So a layout's groups priced on a node of ``unit`` GPUs stand on the ranks of every ``g``-th, whatever ``k``
        (a DP dimension of 131,072 without TP: one world group of 16,384 members, runs of 8 on 8-GPU nodes)."""
        k = self.copies * self.runs
        if self.base is None or k == 1:
            return None
        if unit not in self._within:
            g = math.gcd(k, unit)
            made: tuple[np.ndarray, int, int] | None = None
            if g == k:
                made = (self.base, self.copies, self.runs)
            elif g > 1 and self.copies > 1:  # copy g * i of every group, i slowest (the first group stays first)
                made = ((self.base + np.arange(0, k, g)[:, None, None]).reshape(-1, self.base.shape[1]), g, 1)
            elif g > 1:  # each member followed by its k / g runs' first ranks
                made = ((self.base[:, :, None] + np.arange(0, k, g)).reshape(self.base.shape[0], -1), 1, g)
            if len(self._within) >= 4:
                self._within.clear()
            self._within[unit] = made
        return self._within[unit]

    def lists(self) -> list[list[int]]:
        """Every group as a list of ranks (made once)."""
        if self._lists is None:
            self._lists = self.array.tolist()
        return self._lists


def group_key(groups: Sequence[list[int]]) -> object:
    """A value naming ``groups``: their :class:`Groups` key when :func:`groups_of` made them, else every rank."""
    return groups.key if isinstance(groups, Groups) else tuple(map(tuple, groups))


def first_size(groups: Sequence[list[int]]) -> int:
    """Ranks in the first of ``groups`` (of :class:`Groups`: the array's width, no list made of 131,072 ranks)."""
    return groups.shape[1] if isinstance(groups, Groups) else len(groups[0])


_SHAPES: dict[tuple[str, object, tuple[str, ...]], Group] = {}
# Cleared when either bound is passed: entries, and ranks held in the keys of groups not made by groups_of
# (2**22 ranks: ~150 MB at most), so a long search cannot grow it.
_SHAPES_MAX = 1024
_SHAPES_MAX_RANKS = 2**22
_shapes_ranks = 0


def group_shape(cluster: Cluster, op: str, groups: Sequence[list[int]]) -> Group:
    """The collective model's :class:`Group` of ``groups`` on the placed cluster (one rule for both models:
    :func:`slowlink.collectives.communicator.communicator`).

    Cached by value: the cluster's :attr:`~slowlink.spec.cluster.Cluster.key`, the op's traffic patterns (all_gather and
    reduce_scatter place alike: :func:`~slowlink.collectives.communicator.patterns_of`) and the groups, named
    by their :class:`Groups` key when :func:`groups_of` made them (every rank otherwise), so a plan repeated
    on an equal cluster places each communicator once.
    """
    global _shapes_ranks
    named = isinstance(groups, Groups)
    key = (cluster.key, group_key(groups), patterns_of(op))  # the Group reads op through its patterns only
    hit = _SHAPES.get(key)
    if hit is None:
        ranks = 0 if named or not groups else len(groups) * len(groups[0])
        if len(_SHAPES) >= _SHAPES_MAX or _shapes_ranks + ranks > _SHAPES_MAX_RANKS:
            _SHAPES.clear()
            _shapes_ranks = 0
        shifted = groups.within(cluster.gpus_per_node) if isinstance(groups, Groups) else None
        if shifted is not None and shifts_apply(cluster, op, *shifted):
            base, copies, runs = shifted
            hit = communicator(cluster, op, base, copies=copies, runs=runs)
        else:
            hit = communicator(cluster, op, groups)
        _SHAPES[key] = hit
        _shapes_ranks += ranks
    return hit


def analytical_cost(cluster: Cluster) -> CommCost:
    """The :data:`CommCost` of the analytical collective model (``slowlink.collectives.predict``)."""

    def cost(op: str, size_bytes: float, groups: Sequence[list[int]]) -> float:
        if not groups or first_size(groups) < 2 or size_bytes <= 0:
            return 0.0
        return predict(cluster, op, size_bytes, group_shape(cluster, op, groups)).time_s

    return cost


def explain(cluster: Cluster, op: str, size_bytes: float, groups: Sequence[list[int]]) -> Prediction | None:
    """The analytical prediction (algorithm, bottleneck link in words) of one priced collective."""
    if not groups or first_size(groups) < 2 or size_bytes <= 0:
        return None
    return predict(cluster, op, size_bytes, group_shape(cluster, op, groups))


def _key(p: Parallel) -> _Key:
    return (p.tp, p.cp, p.dp, p.pp, p.ep, p.order)


@functools.lru_cache(maxsize=256)
def _array(key: _Key, dim: Dimension) -> np.ndarray:
    tp, cp, dp, pp, ep, order = key
    return dimension_array(Parallel.of(tp=tp, cp=cp, dp=dp, pp=pp, ep=ep, order=order), dim)


def groups_of(p: Parallel, dim: str) -> Groups:
    """Every communicator of ``dim`` (tp, cp, dp, dp_cp, tp_cp, tp_pp, tp_cp_dp, world, ep, edp, pp_pairs,
    cp_pairs), cached per layout.

    edp is the expert-data-parallel group (same expert shard, dp/ep ranks); pp_pairs are the
    [stage i, stage i+1] pairs of every pipeline boundary, cp_pairs the ring neighbours of context parallelism.
    """
    return _derived(_key(p), dim)


@functools.lru_cache(maxsize=256)
def _derived(key: _Key, dim: str) -> Groups:
    split = _split(key, dim)
    if split is not None:  # the reduced layout's groups times f, f copies or f runs (:func:`_split`)
        reduced, f, kind = split
        base = np.ascontiguousarray(f * _made(reduced, dim))
        base.setflags(write=False)
        make = functools.partial(_made, key, dim)
        if kind == "copies":
            return Groups(make, (base.shape[0] * f, base.shape[1]), (key, dim), base, copies=f)
        return Groups(make, (base.shape[0], base.shape[1] * f), (key, dim), base, runs=f)
    made = _made(key, dim)
    return Groups(functools.partial(np.asarray, made), made.shape, (key, dim))  # a partial pickles, a lambda not


_SPANS = {  # the dimensions each kind of group runs along (ep: ep consecutive DP indices; edp: every ep-th)
    "tp": ("tp",), "cp": ("cp",), "dp": ("dp",), "pp": ("pp",), "dp_cp": ("dp", "cp"), "tp_cp": ("tp", "cp"),
    "tp_pp": ("tp", "pp"), "tp_cp_dp": ("tp", "cp", "dp"), "world": ("tp", "cp", "dp", "pp"), "ep": ("dp",),
    "edp": (), "pp_pairs": (), "cp_pairs": (),
}


def _split(key: _Key, dim: str) -> tuple[_Key, int, str] | None:
    """The groups of ``dim`` as a smaller layout's, times ``f``, with ``f`` shifted copies or runs.

    Let X be the fastest-varying dimension of more than one rank (``order``'s first such) and ``f`` its size (``ep``
    when X is dp with expert parallelism: EP groups are ``ep`` consecutive DP indices). A rank is then ``x + f * r``
    with ``x < f`` and ``r`` the rank of the same other coordinates in the layout with X ``f`` times smaller, so
    every group is that layout's group times ``f``: shifted by ``x`` = 1 .. f - 1 (``copies``) when the group
    does not run along X, each member followed by the next ``f - 1`` ranks (``runs``) when it does. Not for
    pairs along X (the pipeline pairs when pp is X, the ring neighbours when cp is; they run along part of it)
    nor for ep and edp groups over a DP dimension X without expert parallelism; None then, and when every
    dimension is 1."""
    tp, cp, dp, pp, ep, order = key
    size = {"tp": tp, "cp": cp, "dp": dp, "pp": pp}
    fast = next((d for d in order.split("-") if size[d] > 1), None)
    if fast is None or (fast, dim) in (("pp", "pp_pairs"), ("cp", "cp_pairs")) \
            or (fast == "dp" and ep == 1 and dim in ("ep", "edp")) or dim not in _SPANS:
        return None
    f = ep if fast == "dp" and ep > 1 else size[fast]
    size[fast] //= f
    reduced = (size["tp"], size["cp"], size["dp"], size["pp"], 1 if fast == "dp" else ep, order)  # f = ep: 1
    return reduced, f, "runs" if fast in _SPANS[dim] else "copies"


def _pairs(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """``[src, dst]`` rows, element by element (filled in place: ``np.stack`` of strided views is ~8x slower)."""
    out = np.empty((*src.shape, 2), dtype=src.dtype)
    out[..., 0], out[..., 1] = src, dst
    return out.reshape(-1, 2)


def _made(key: _Key, dim: str) -> np.ndarray:
    ep = key[4]
    if dim == "edp":  # g[k::ep] for each dp group g and k < ep
        a = _array(key, "dp")
        return a.reshape(a.shape[0], -1, ep).transpose(0, 2, 1).reshape(-1, a.shape[1] // ep)
    if dim == "pp_pairs":  # [g[i], g[i + 1]] for each group g and stage boundary i
        a = _array(key, "pp")
        return _pairs(a[:, :-1], a[:, 1:])
    if dim == "cp_pairs":  # [g[i], g[(i + 1) % len(g)]] for each group g and ring position i
        a = _array(key, "cp")
        return _pairs(a, np.roll(a, -1, axis=1))
    if dim in ("tp", "cp", "dp", "dp_cp", "tp_cp", "ep", "pp", "tp_pp", "tp_cp_dp", "world"):
        return _array(key, dim)
    raise ValueError(f"dim ({dim!r}) is not a communicator kind")


def tp_spans_nodes(p: Parallel, cluster: Cluster) -> bool:
    """True when a TP group leaves the scale-up domain (allowed, but its traffic crosses the network)."""
    dom = max(cluster.scale_up.domain_gpus, 1)
    return p.tp > 1 and any(len({r // dom for r in g}) > 1 for g in groups_of(p, "tp")[:1])
