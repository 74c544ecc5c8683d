"""How a training stack buckets one GPU's data-parallel traffic: the parameters per gradient and gather bucket, the
bucket left after the last backward, and the seconds and calls of one collective per bucket (the stack's fields:
catalog/data/stacks.yaml)."""

from __future__ import annotations

from dataclasses import dataclass

from slowlink.catalog.stack import buckets
from slowlink.spec.workload import Workload
from slowlink.units import PRECISION_BYTES
from slowlink.workload.comm import CommCost, Groups
from slowlink.workload.memory import vocab_shard_params


def grad_bucket_params(w: Workload, grad_bytes: float) -> float:
    """Parameters per DP gradient bucket as the workload's stack sizes it (``stack.grad_bucket_params`` and
    ``_per_dp`` at dp x cp ranks, or ``grad_bucket_bytes`` / bytes per gradient: catalog/data/stacks.yaml)."""
    return w.stack.grad_bucket_params(w.parallel.dp_shards, grad_bytes)


def last_bucket_params(w: Workload, local_params: float, embedding_params: float = 0.0) -> float:
    """Parameters in the DP bucket that no compute can hide: the stack reduces gradients in buckets
    (:func:`grad_bucket_params`; Megatron-Core: max(40M, 1M x dp) parameters, core_r0.10.0
    distributed_data_parallel.py l.54-56); the bucket holding the first layers is ready only when the last backward
    ends, and the optimizer waits for it. Its parameter all-gather (distributed optimizer) likewise precedes the
    first forward.

    ``embedding_params``: the word embedding that bucket holds. param_and_grad_buffer.py l.533-561 fills
    buckets from the last parameter backwards and closes one only after a whole parameter is in it (and
    puts a shared embedding in a bucket of its own, l.520-531): the first parameter, the embedding, is in
    the last bucket, never split. That bucket is the embedding plus what remains of the other parameters,
    which the model does not know at tensor granularity: the full bucket when the embedding is smaller,
    the embedding alone (a lower bound) when it is larger."""
    bucket = max(grad_bucket_params(w, PRECISION_BYTES[w.training.grad_comm_dtype]), embedding_params)
    return min(local_params, bucket)


def bucketed_s(cost: CommCost, op: str, params: float, bytes_per_param: float, bucket_params: float | None,
               groups: Groups, first_params: float | None = None) -> tuple[float, int]:
    """(seconds, calls) of one collective per bucket over ``params`` parameters (:func:`~slowlink.catalog.stack.
    buckets`; ``bucket_params`` None: one call for all), each call paying the collective model's latency."""
    if params <= 0:
        return 0.0, 0
    sizes = ((params, 1),) if bucket_params is None else buckets(params, bucket_params, first_params)
    return (sum(n * cost(op, size * bytes_per_param, groups) for size, n in sizes),
            sum(n for _, n in sizes))


@dataclass(frozen=True)
class DpBuckets:
    """How the workload's stack buckets one GPU's DP traffic, in parameters: the gradient buckets (``grad``; None:
    one call per buffer), PyTorch DDP's first bucket, the ZeRO-1/2 gather buckets, and the bucket reduced after
    the last backward, which nothing hides (``last``)."""

    grad: float | None
    first: float | None
    gather: float | None
    last: float


def dp_buckets(w: Workload, layers: int, dense: float, expert: float, grad_bytes: float) -> DpBuckets:
    """The :class:`DpBuckets` of a stage of ``layers`` layers holding ``dense`` + ``expert`` parameters: the stack's
    buckets (:func:`grad_bucket_params`, ``first_bucket_bytes``, ``gather_bucket_params``); one per FSDP unit for
    ZeRO-2 of a stack that shards per layer (its layers and the model's end(s) the stage holds); one per buffer
    without overlap.grad_reduce in a stack whose ``buckets_without_overlap`` is false (Megatron-Core: bucket_size
    None). The last bucket: Megatron-Core's distributed optimizer's holds the word embedding
    (:func:`last_bucket_params`)."""
    p, st = w.parallel, w.stack.fields
    if p.zero == 2 and st.sharded_unit == "layer":
        unit = (dense + expert) / (layers + (2 if p.pp == 1 else 1))
        return DpBuckets(unit, None, unit, unit)
    grad = grad_bucket_params(w, grad_bytes) if w.overlap.grad_reduce or st.buckets_without_overlap else None
    last = last_bucket_params(w, dense, vocab_shard_params(w) if p.zero == 1 else 0.0)
    return DpBuckets(grad, w.stack.first_bucket_params(grad_bytes),
                     grad if st.gather_bucket_params is None else st.gather_bucket_params, last)
