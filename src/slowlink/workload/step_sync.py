"""The small synchronising all-reduces a training stack runs outside the layers: the optimizer step's gradient
norm (one fp32 per group, before clipping) and the loss the last pipeline stage reduces over DP for logging in
every micro-batch. Which groups and how often are the stack's (``grad_norm_groups``, ``grad_norm_groups_sharded``,
``loss_syncs_per_micro_batch`` in catalog/data/stacks.yaml, each cited); each is a few bytes, so it costs the
collective's latency, and nothing runs beside it: the clip waits for the norm, the next micro-batch's send for the
loss on the compute stream.
"""

from __future__ import annotations

from dataclasses import dataclass

from slowlink.spec.workload import Workload
from slowlink.units import PRECISION_BYTES
from slowlink.workload.comm import CommCost, groups_of

NORM_BYTES = PRECISION_BYTES["fp32"]  # the squared norm, summed in fp32 (Megatron's get_grad_norm_fp32, ...)
# Megatron-LM's loss_func reduces [sum of token losses, token count], two fp32 (pretrain_gpt.py)
LOSS_BYTES = 2.0 * PRECISION_BYTES["fp32"]
# the stack's group names as communicators (slowlink.workload.comm.groups_of): DP is reduced over dp x cp, as the
# gradients are
GROUP_DIM = {"tp_pp": "tp_pp", "tp": "tp", "dp": "dp_cp", "pp": "pp", "tp_cp_dp": "tp_cp_dp", "world": "world"}


@dataclass(frozen=True)
class StepSync:
    """Seconds and calls of one step's norm all-reduces (``norm_s``, ``norm_calls``) and of one micro-batch's
    loss all-reduces on the last pipeline stage (``loss_s``, ``loss_calls``)."""

    norm_s: float
    norm_calls: int
    loss_s: float
    loss_calls: int


def group_size(w: Workload, dim: str) -> int:
    """Ranks in one communicator of ``dim`` (a value of :data:`GROUP_DIM`)."""
    p = w.parallel
    size = {"tp": p.tp, "pp": p.pp, "dp_cp": p.dp * p.cp, "dp": p.dp, "tp_pp": p.tp * p.pp,
            "tp_cp_dp": p.tp * p.cp * p.dp, "world": p.tp * p.cp * p.dp * p.pp}
    return size[dim]


def norm_dims(w: Workload) -> tuple[str, ...]:
    """The communicators of the step's gradient-norm all-reduces, in order: the stack's groups (its sharded ones
    under ZeRO >= 1), those of one rank left out (nothing to reduce)."""
    f = w.stack.fields
    groups = f.grad_norm_groups_sharded if w.parallel.zero >= 1 else f.grad_norm_groups
    return tuple(d for d in (GROUP_DIM[g] for g in groups) if group_size(w, d) > 1)


def step_sync(w: Workload, price: CommCost) -> StepSync:
    """:class:`StepSync` of ``w``: each norm all-reduce of :data:`NORM_BYTES` over its groups, and the stack's
    loss all-reduces of :data:`LOSS_BYTES` over DP (none with dp 1), priced by ``price``."""
    dims = norm_dims(w)
    norm = sum(price("all_reduce", NORM_BYTES, groups_of(w.parallel, d)) for d in dims)
    calls = w.stack.fields.loss_syncs_per_micro_batch if w.parallel.dp > 1 else 0
    loss = calls * price("all_reduce", LOSS_BYTES, groups_of(w.parallel, "dp")) if calls else 0.0
    return StepSync(norm, len(dims), loss, calls)
