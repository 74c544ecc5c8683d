"""Which ranks form each parallel group: Megatron-LM's rank order, tp fastest, then cp, dp, pp.

A rank ``r`` has coordinates ``r = tp_i + tp * (cp_i + cp * (dp_i + dp * pp_i))`` (Megatron's default
``order="tp-cp-ep-dp-pp"``). EP groups are carved out of the DP dimension: ``ep`` consecutive DP indices
with the same tp, cp and pp coordinates. Groups are returned in *rank* space; the topology maps ranks to
GPUs and nodes (block, fragmented or custom placement, ``slowlink.topology``).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from slowlink.workload.spec import ParallelSpec

Dimension = Literal["tp", "cp", "dp", "ep", "pp", "dp_cp"]


def rank_grid(p: ParallelSpec) -> np.ndarray:
    """Ranks as an array indexed ``[pp, dp, cp, tp]``."""
    return np.arange(p.tp * p.cp * p.dp * p.pp).reshape(p.pp, p.dp, p.cp, p.tp)


def dimension_groups(p: ParallelSpec, dim: Dimension) -> list[list[int]]:
    """Every communicator of dimension ``dim``, each as its sorted list of ranks.

    ``dp_cp`` is the gradient-reduction group of context-parallel training (Megatron reduces gradients
    over dp x cp). All groups of one dimension run the same collective at the same time.
    """
    g = rank_grid(p)
    if dim == "tp":
        flat = g.reshape(-1, p.tp)
    elif dim == "cp":
        flat = g.transpose(0, 1, 3, 2).reshape(-1, p.cp)
    elif dim == "dp":
        flat = g.transpose(0, 2, 3, 1).reshape(-1, p.dp)
    elif dim == "dp_cp":
        flat = g.transpose(0, 3, 1, 2).reshape(-1, p.dp * p.cp)
    elif dim == "ep":
        ep_grid = g.reshape(p.pp, p.dp // p.ep, p.ep, p.cp, p.tp)
        flat = ep_grid.transpose(0, 1, 3, 4, 2).reshape(-1, p.ep)
    elif dim == "pp":
        flat = g.transpose(1, 2, 3, 0).reshape(-1, p.pp)
    else:
        raise ValueError(f"dim ({dim!r}) must be one of tp, cp, dp, ep, pp, dp_cp")
    return [sorted(int(r) for r in row) for row in flat]
