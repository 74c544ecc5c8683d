"""One trace file folded, event by event, into compact arrays: what :mod:`slowlink.trace.kineto` needs of it and
nothing else (kernels' names are interned, times kept as float64 arrays), so a large trace costs memory in
proportion to its kernels and launches, not to its JSON.

Chrome trace events used (Kineto's output, libkineto ``output_json.cpp`` and torch.profiler): complete events
(``ph`` "X") with ``ts``/``dur`` in microseconds; device work has ``cat`` ``kernel``, ``gpu_memcpy`` or
``gpu_memset`` and ``args.stream`` and ``args.correlation`` (the id of the CPU runtime call that launched it);
``ProfilerStep#N`` is a CPU annotation; NCCL kernels carry their collective's ``Collective name``, ``In msg
nelems``/``Out msg nelems``, ``dtype``, ``Group size`` and ``Process Group Name`` (PyTorch >= 2.1); gloo runs a
collective on its ``pt_gloo_runloop`` thread under a ``gloo:<op>`` annotation with ``Input Dims`` and
``Input type``. With ``record_shapes`` a CPU op carries its inputs' ``Input Dims`` and ``Input type``, and a
kernel the ``External id`` of the innermost op that launched it (PyTorch >= 2.0; older traces' kernels carry their
correlation there, and their kernels stay unattributed).
"""

from __future__ import annotations

import json
import math
import re
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slowlink.errors import SpecError
from slowlink.trace.classes import OPTIMIZER_SCOPE
from slowlink.trace.stream import EVENTS_KEY, iter_trace

STEP = re.compile(r"ProfilerStep#(\d+)")
DEVICE_CATS = re.compile(r"kernel|gpu_mem.+")     # HTA's KERNEL_CATEGORY_PATTERN (searched)
GLOO = re.compile(r"gloo:(\w+)")
# CPU ops that launch or wait for a collective: not computation on a CPU trace
NOT_COMPUTE_CPU = ("c10d::", "record_param_comms", "nccl:", "gloo:")
# PyTorch's collective names (record_param_comms / NCCL kernel args, and gloo's annotation) to nccl-tests' ops
OP_OF_NAME: dict[str, str] = {
    "allreduce": "all_reduce", "all_reduce": "all_reduce", "allreduce_coalesced": "all_reduce",
    "allgather": "all_gather", "all_gather": "all_gather", "_allgather_base": "all_gather",
    "allgather_into_tensor_coalesced": "all_gather", "all_gather_into_tensor": "all_gather",
    "reduce_scatter": "reduce_scatter", "_reduce_scatter_base": "reduce_scatter",
    "reduce_scatter_tensor_coalesced": "reduce_scatter", "reduce_scatter_tensor": "reduce_scatter",
    "all_to_all": "all_to_all", "alltoall": "all_to_all", "alltoall_base": "all_to_all", "all_to_allv": "all_to_all",
    "broadcast": "broadcast", "reduce": "reduce", "send": "send_recv", "recv": "send_recv", "sendrecv": "send_recv",
}
# NCCL kernel names (ncclKernel_AllReduce_RING_LL_Sum_float, ncclDevKernel_AllGather_RING_LL): the op when the
# trace records no collective arguments
_NCCL_OP = re.compile(r"nccl(?:Dev)?Kernel_([A-Za-z]+)")
_NCCL_OPS = {"AllReduce": "all_reduce", "AllGather": "all_gather", "ReduceScatter": "reduce_scatter",
             "Broadcast": "broadcast", "Reduce": "reduce", "SendRecv": "send_recv", "AllToAll": "all_to_all"}


@dataclass(frozen=True)
class CollectiveCall:
    """One collective call: its op, nccl-tests size (None when unrecorded), dtype, group, start and duration."""

    op: str
    in_elems: int | None
    out_elems: int | None
    dtype: str | None
    group_size: int | None
    group: str | None
    ts_us: float
    dur_us: float
    kernel: int | None = None   # index of the NCCL kernel in the file's kernel arrays; None for gloo


@dataclass
class FileTrace:
    """What one file holds, as arrays (microseconds, the trace's clock)."""

    path: str
    meta: dict[str, Any] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)
    kernel_name: array = field(default_factory=lambda: array("l"))    # type: ignore[type-arg]
    kernel_ts: array = field(default_factory=lambda: array("d"))      # type: ignore[type-arg]
    kernel_dur: array = field(default_factory=lambda: array("d"))     # type: ignore[type-arg]
    kernel_corr: array = field(default_factory=lambda: array("q"))    # type: ignore[type-arg]
    kernel_stream: array = field(default_factory=lambda: array("q"))  # type: ignore[type-arg]
    kernel_ext: array = field(default_factory=lambda: array("q"))     # type: ignore[type-arg]
    launch_corr: array = field(default_factory=lambda: array("q"))    # type: ignore[type-arg]
    launch_ts: array = field(default_factory=lambda: array("d"))      # type: ignore[type-arg]
    # CPU traces: per thread, each op's start, duration and signature (an index into ``sigs``)
    cpu_ops: dict[Any, tuple[array, array, array]] = field(default_factory=dict)  # type: ignore[type-arg]
    # every op signature met: (op name, its inputs' dims as JSON, its first input's type); interned
    sigs: list[tuple[str, str, str | None]] = field(default_factory=list)
    op_ext: array = field(default_factory=lambda: array("q"))   # type: ignore[type-arg]  # shaped ops' External id
    op_sig: array = field(default_factory=lambda: array("l"))   # type: ignore[type-arg]  # and their signature
    sig_index: dict[tuple[str, str, str | None], int] = field(default_factory=dict)
    steps: list[tuple[int, float, float]] = field(default_factory=list)
    optimizer_spans: list[tuple[float, float]] = field(default_factory=list)  # Optimizer.step#... (start, end)
    collectives: list[CollectiveCall] = field(default_factory=list)
    gloo_threads: set[Any] = field(default_factory=set)
    step_pids: set[Any] = field(default_factory=set)      # the processes whose ProfilerStep#N the file holds
    devices: set[int | None] = field(default_factory=set)  # the devices its kernels ran on (args.device)
    events: int = 0
    ns_resolution: bool = False   # some ``ts`` has a fraction of a microsecond (Kineto's ns-resolution output)

    @property
    def rank(self) -> int | None:
        info = self.meta.get("distributedInfo")
        rank = info.get("rank") if isinstance(info, dict) else None
        return rank if isinstance(rank, int) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def nccl_call(name: str, args: dict[str, Any], ts: float, dur: float, kernel: int) -> CollectiveCall:
    """A communication kernel as a collective call: its arguments where recorded, else the op in its name."""
    coll = args.get("Collective name")
    op = OP_OF_NAME.get(str(coll)) if coll is not None else None
    if op is None:
        m = _NCCL_OP.match(name)
        op = _NCCL_OPS.get(m.group(1), m.group(1)) if m else (str(coll) if coll else "unknown")
    group = args.get("Process Group Name")
    return CollectiveCall(op, _int(args.get("In msg nelems")), _int(args.get("Out msg nelems")),
                          str(args["dtype"]) if "dtype" in args else None, _int(args.get("Group size")),
                          str(group) if group is not None else None, ts, dur, kernel)


def gloo_call(op_name: str, args: dict[str, Any], ts: float, dur: float) -> CollectiveCall:
    """A gloo collective from its annotation: elements of its first input and its type (the group's size is the
    trace's world size, set by the reader once the whole file is read)."""
    dims, types = args.get("Input Dims") or [[]], args.get("Input type") or [None]
    first = dims[0] if isinstance(dims, list) and dims else []
    elems = math.prod(int(d) for d in first) if isinstance(first, list) and all(isinstance(d, int) for d in first) \
        else None
    return CollectiveCall(OP_OF_NAME.get(op_name, op_name), elems, None, str(types[0]) if types and types[0] else None,
                          None, None, ts, dur)


def _signature(ft: FileTrace, name: str, args: dict[str, Any]) -> int:
    """The index in ``ft.sigs`` of an op's (name, Input Dims, first Input type); dims "" when unrecorded."""
    dims, types = args.get("Input Dims"), args.get("Input type")
    first = types[0] if isinstance(types, list) and types and isinstance(types[0], str) and types[0] else None
    key = (name, json.dumps(dims, separators=(",", ":")) if dims is not None else "", first)
    idx = ft.sig_index.setdefault(key, len(ft.sigs))
    if idx == len(ft.sigs):
        ft.sigs.append(key)
    return idx


def _event(ft: FileTrace, ev: Any, interned: dict[str, int]) -> None:
    if not isinstance(ev, dict) or ev.get("ph") != "X":
        if (isinstance(ev, dict) and ev.get("ph") == "M" and ev.get("name") == "thread_name"
                and "gloo" in str((ev.get("args") or {}).get("name", ""))):
            ft.gloo_threads.add(ev.get("tid"))
        return
    ts, dur = _num(ev.get("ts")), _num(ev.get("dur"))
    if ts is None or dur is None:
        return
    if not ft.ns_resolution and ts != int(ts):
        ft.ns_resolution = True
    cat, name = str(ev.get("cat", "")), str(ev.get("name", ""))
    raw_args = ev.get("args")
    args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
    if DEVICE_CATS.search(cat) and _int(args.get("stream")) is not None and args["stream"] >= 0:
        _kernel(ft, name, args, ts, dur, interned)
    elif cat not in ("gpu_user_annotation", "python_function"):  # HTA drops both
        _host(ft, cat, name, args, ts, dur, ev.get("tid"), ev.get("pid"))


def _kernel(ft: FileTrace, name: str, args: dict[str, Any], ts: float, dur: float,
            interned: dict[str, int]) -> None:
    """A device kernel, memcpy or memset: its arrays' row, and an NCCL kernel's collective call."""
    idx = interned.setdefault(name, len(interned))
    if idx == len(ft.names):
        ft.names.append(name)
    corr = _int(args.get("correlation"))
    ft.cpu_ops.clear()  # a GPU trace is read from its kernels: its CPU ops are not kept (memory)
    ft.kernel_name.append(idx)
    ft.kernel_ts.append(ts)
    ft.kernel_dur.append(dur)
    ft.kernel_corr.append(-1 if corr is None else corr)
    ft.kernel_stream.append(args["stream"])
    ext = _int(args.get("External id"))
    ft.kernel_ext.append(-1 if ext is None else ext)
    ft.devices.add(_int(args.get("device")))
    if name.startswith("nccl") or "ncclKernel" in name:
        ft.collectives.append(nccl_call(name, args, ts, dur, len(ft.kernel_ts) - 1))


def _host(ft: FileTrace, cat: str, name: str, args: dict[str, Any], ts: float, dur: float, tid: Any,
          pid: Any = None) -> None:
    """A CPU event: a launch (its correlation), a step, a gloo collective, or a compute op (kept whole on a CPU
    trace; on a GPU trace only a shaped op's External id and signature, to attribute its kernels)."""
    corr = _int(args.get("correlation"))
    if corr is not None:
        ft.launch_corr.append(corr)
        ft.launch_ts.append(ts)
    step = STEP.match(name)
    if step and cat in ("cpu_op", "user_annotation"):
        ft.steps.append((int(step.group(1)), ts, dur))
        ft.step_pids.add(pid)
        return
    gloo = GLOO.match(name)
    if gloo:
        ft.collectives.append(gloo_call(gloo.group(1), args, ts, dur))
        ft.gloo_threads.add(tid)
        return
    if name.startswith(OPTIMIZER_SCOPE) and cat in ("cpu_op", "user_annotation"):
        ft.optimizer_spans.append((ts, ts + dur))
    if cat != "cpu_op" or name.startswith(NOT_COMPUTE_CPU):
        return
    ext = _int(args.get("External id"))
    if ext is not None and "Input Dims" in args:
        ft.op_ext.append(ext)
        ft.op_sig.append(_signature(ft, name, args))
    if not len(ft.kernel_ts):
        tss, durs, sig = ft.cpu_ops.setdefault(tid, (array("d"), array("d"), array("l")))
        tss.append(ts)
        durs.append(dur)
        sig.append(_signature(ft, name, args))


def read_file(path: Path, max_bytes: int | None = None) -> FileTrace:
    """Fold one trace file (plain or gzip'd JSON) into a :class:`FileTrace`, streaming its events."""
    ft, interned = FileTrace(str(path)), {}  # type: FileTrace, dict[str, int]
    for key, value in iter_trace(path, max_bytes):
        if key == EVENTS_KEY:
            ft.events += 1
            _event(ft, value, interned)
        else:
            ft.meta[key] = value
    if not ft.events and not ft.meta:
        raise SpecError(f"{path}: (no traceEvents) not a PyTorch profiler trace")
    return ft
