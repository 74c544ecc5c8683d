"""Which ranks form each parallel group, for a rank order given fastest-varying first.

``parallel.order`` names the dimensions from the fastest-varying (neighbouring ranks) to the slowest:
Megatron-LM's default ``tp-cp-dp-pp`` (its ``order="tp-cp-ep-dp-pp"``, EP inside DP; megatron/core/
parallel_state.py), or Meta's ``tp-cp-pp-dp`` for Llama 3 (Dubey et al. 2024, Sec. 3.3.2: "[TP, CP, PP, DP]",
DP outermost so that the most bandwidth-hungry groups stay closest). In Megatron's order a rank is
``r = tp_i + tp * (cp_i + cp * (dp_i + dp * pp_i))``. EP groups are carved out of the DP dimension: ``ep``
consecutive DP indices with the same other coordinates. Groups are returned in *rank* space; the topology
maps ranks to GPUs and nodes (block, fragmented or custom placement, ``slowlink.topology``).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from slowlink.spec.workload import Parallel

Dimension = Literal["tp", "cp", "dp", "ep", "pp", "dp_cp", "tp_cp", "tp_pp", "tp_cp_dp", "world"]
DEFAULT_ORDER = "tp-cp-dp-pp"


def order_of(p: Parallel) -> list[str]:
    """The dimensions of ``p.order``, fastest-varying first."""
    return p.order.split("-")


def rank_grid(p: Parallel) -> tuple[np.ndarray, list[str]]:
    """Ranks as an array with one axis per dimension, slowest first, and the axes' names."""
    axes = order_of(p)[::-1]
    size = {"tp": p.tp, "cp": p.cp, "dp": p.dp, "pp": p.pp}
    return np.arange(p.tp * p.cp * p.dp * p.pp).reshape([size[a] for a in axes]), axes


def _groups_over(grid: np.ndarray, axes: list[str], inner: list[str]) -> np.ndarray:
    """Rows of ranks that differ only along the axes ``inner`` (moved last, in that order)."""
    rest = [i for i, a in enumerate(axes) if a not in inner]
    moved = grid.transpose(rest + [axes.index(a) for a in inner])
    return moved.reshape(-1, int(np.prod([grid.shape[axes.index(a)] for a in inner])))


def dimension_groups(p: Parallel, dim: Dimension) -> list[list[int]]:
    """Every communicator of dimension ``dim``, each as its sorted list of ranks.

    ``dp_cp`` is the gradient-reduction group of context-parallel training (Megatron reduces gradients
    over dp x cp); ``tp_cp`` Megatron's tensor-and-context-parallel group (the MoE aux loss's token counts);
    ``tp_pp`` Megatron's model-parallel group, ``tp_cp_dp`` the ranks of one pipeline stage, ``world`` every rank
    (the groups a step's gradient norm is reduced over, :mod:`slowlink.workload.step_sync`).
    All groups of one dimension run the same collective at the same time.
    """
    out: list[list[int]] = dimension_array(p, dim).tolist()
    return out


def dimension_array(p: Parallel, dim: Dimension) -> np.ndarray:
    """:func:`dimension_groups` as a (groups, size) array, each row sorted."""
    grid, axes = rank_grid(p)
    if dim in ("tp", "cp", "dp", "pp"):
        flat = _groups_over(grid, axes, [dim])
    elif dim == "dp_cp":
        flat = _groups_over(grid, axes, ["dp", "cp"])
    elif dim in ("tp_cp", "tp_pp", "tp_cp_dp"):
        flat = _groups_over(grid, axes, dim.split("_"))
    elif dim == "world":
        flat = grid.reshape(1, -1)
    elif dim == "ep":
        k = axes.index("dp")
        split = grid.reshape((*grid.shape[:k], p.dp // p.ep, p.ep, *grid.shape[k + 1:]))
        flat = _groups_over(split, [*axes[:k], "dp_outer", "ep", *axes[k + 1:]], ["ep"])
    else:
        raise ValueError(f"dim ({dim!r}) must be one of tp, cp, dp, ep, pp, dp_cp, tp_cp, tp_pp, tp_cp_dp, world")
    if (flat[:, 1:] >= flat[:, :-1]).all():  # the usual case: rank order already ascending along the group
        return flat
    return np.sort(flat, axis=1)
