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

    ``base`` with ``copies`` or ``runs`` > 1 (TP the fastest dimension): the groups are ``base``'s rows, each
    followed by ``copies - 1`` copies with every rank shifted by 1, 2, ... (the other TP ranks' groups of a
    dimension without TP), or with ``runs - 1`` more members after each member, shifted so (the other TP ranks of
    a group with TP). The array itself is then made only when read (``make``), so a model that prices the groups
    from ``base`` (:func:`~slowlink.collectives.communicator.shifts_apply`) never builds it."""

    __slots__ = ("_array", "_lists", "_make", "base", "copies", "key", "runs", "shape")

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
        if isinstance(groups, Groups) and groups.base is not None \
                and shifts_apply(cluster, op, groups.base, groups.copies, groups.runs):
            hit = communicator(cluster, op, groups.base, copies=groups.copies, runs=groups.runs)
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
    tp, order = key[0], key[5]
    if tp > 1 and order.startswith("tp-") and dim in (*_COPIES, *_RUNS):
        # TP fastest: rank = tp_i + tp * (the rank of the same other coordinates with tp = 1). The groups of a
        # dimension without TP come tp_i fastest, those of one with TP hold every tp_i of each such rank in a row:
        # either way the tp = 1 layout's groups times tp, with tp copies or tp runs
        base = np.ascontiguousarray(tp * _made((1, *key[1:]), dim))
        base.setflags(write=False)
        make = functools.partial(_made, key, dim)
        if dim in _COPIES:
            return Groups(make, (base.shape[0] * tp, base.shape[1]), (key, dim), base, copies=tp)
        return Groups(make, (base.shape[0], base.shape[1] * tp), (key, dim), base, runs=tp)
    made = _made(key, dim)
    return Groups(functools.partial(np.asarray, made), made.shape, (key, dim))  # a partial pickles, a lambda not


_COPIES = ("pp_pairs", "cp_pairs", "dp", "cp", "dp_cp", "pp", "ep", "edp")  # the dimensions without TP
_RUNS = ("tp", "tp_cp", "tp_pp", "tp_cp_dp", "world")  # those with TP


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
