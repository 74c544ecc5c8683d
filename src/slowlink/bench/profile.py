"""Where a measured step's compute goes: torch.profiler events classed into gemm, attention, elementwise (norms,
activations, casts, loss), optimizer and other, plus the time no kernel ran (idle).

On CUDA the device kernels are classed by name (:data:`slowlink.trace.classes.RULES`, shared with ``read
kineto``) and timed by their own start/end; idle = wall time of the profiled steps - the union of every kernel's
busy interval (two streams' overlapping kernels count once): launch gaps, host syncs, Python between kernels.
On a CPU there are no device kernels: the ``aten::`` ops are classed by the same rules and timed by their self
CPU time (the op's time minus its child ops'), and idle = wall - their summed self time, which is Python,
autograd-engine and dispatcher overhead, not an idle device. Ops and kernels issued inside
``torch.optim.Optimizer.step`` are optimizer, whatever their name (a CPU AdamW runs plain
``aten::mul_``/``aten::addcdiv_``).

torch.profiler API relied on (torch 2.x, torch/autograd/profiler_util.py ``FunctionEvent``; checked on 2.13):
``prof.events()`` lists FunctionEvents with ``name``, ``device_type`` (``torch.autograd.DeviceType``),
``time_range.start/.end`` (microseconds), ``self_cpu_time_total`` (microseconds), ``cpu_parent``, ``id`` and
``linked_correlation_id`` (a device kernel's link to the CPU op that launched it, set by
torch/autograd/profiler.py ``_parse_kineto_results``); Optimizer.step is recorded as ``Optimizer.step#<Class>.step``
(torch/optim/optimizer.py, ``profile_hook_step``). A missing attribute is read as absent (:func:`records_of`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from slowlink.errors import BenchError
from slowlink.trace.classes import CLASSES, COPY, OPTIMIZER_SCOPE, classify

__all__ = ["CLASSES", "Record", "breakdown", "classify", "records_of", "union_s"]

@dataclass(frozen=True)
class Record:
    """One timed thing the profiler saw: a device kernel (start/end on the device) or a CPU op (self time)."""

    name: str
    start_s: float
    end_s: float
    self_s: float           # CPU ops: self CPU time; kernels: end - start
    in_optimizer: bool      # issued inside Optimizer.step


def union_s(intervals: Iterable[tuple[float, float]]) -> float:
    """Length of the union of [start, end) intervals (overlaps, e.g. kernels on two streams, count once)."""
    total, cur_start, cur_end = 0.0, None, None
    for start, end in sorted(intervals):
        if cur_end is None or start > cur_end:
            if cur_end is not None and cur_start is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_end is not None and cur_start is not None:
        total += cur_end - cur_start
    return total


def breakdown(records: list[Record], wall_s: float, steps: int, device_kernels: bool) -> dict[str, float]:
    """Seconds per step of each class, ``idle_s`` and ``wall_s`` (module docstring): kernels' busy union or the CPU
    ops' summed self time against the wall; ``elementwise_copy_s``: the part of elementwise that is copies and
    casts (:data:`COPY`)."""
    per, copy = dict.fromkeys(CLASSES, 0.0), 0.0
    for r in records:
        cls = classify(r.name, r.in_optimizer)
        per[cls] += r.self_s
        copy += r.self_s if cls == "elementwise" and COPY.search(r.name) else 0.0
    busy = union_s((r.start_s, r.end_s) for r in records) if device_kernels else sum(per.values())
    out = {f"{c}_s": v / steps for c, v in per.items()}
    out.update(idle_s=max(0.0, wall_s - busy) / steps, wall_s=wall_s / steps, elementwise_copy_s=copy / steps)
    return out


def _in_optimizer(ev: Any) -> bool:
    while ev is not None:
        if str(getattr(ev, "name", "")).startswith(OPTIMIZER_SCOPE):
            return True
        ev = getattr(ev, "cpu_parent", None)
    return False


def records_of(events: Iterable[Any], device: str) -> list[Record]:
    """The profiler's events as :class:`Record` s: on ``cuda*`` the device kernels (memcpy/memset included), each
    marked optimizer when the CPU op that launched it (``linked_correlation_id``) ran inside Optimizer.step; on a
    CPU the synchronous ``aten::`` ops by self CPU time."""
    events = list(events)
    if device.startswith("cuda"):
        # the launching ops: CPU events not themselves linked (runtime calls carry a link and their own id space)
        cpu_by_id = {getattr(e, "id", None): e for e in events
                     if _kind(e) == "CPU" and not getattr(e, "linked_correlation_id", 0)}
        out = []
        for e in events:
            if _kind(e) not in ("CUDA", "PrivateUse1"):
                continue
            start, end = e.time_range.start * 1e-6, e.time_range.end * 1e-6
            launcher = cpu_by_id.get(getattr(e, "linked_correlation_id", None))
            out.append(Record(e.name, start, end, end - start, _in_optimizer(launcher)))
        if not out:
            raise BenchError(f"--profile (device {device}): the profiler recorded no device kernels; kernel timing "
                             "needs CUPTI (torch.profiler ProfilerActivity.CUDA)")
        return out
    return [Record(e.name, e.time_range.start * 1e-6, e.time_range.end * 1e-6, e.self_cpu_time_total * 1e-6,
                   _in_optimizer(e))
            for e in events
            if _kind(e) == "CPU" and not getattr(e, "is_async", False) and str(e.name).startswith("aten::")]


def _kind(ev: Any) -> str:
    """``DeviceType.CUDA`` -> "CUDA" (the enum's name; None when the event has no device type)."""
    kind = getattr(ev, "device_type", None)
    return str(getattr(kind, "name", kind)).rsplit(".", 1)[-1]
