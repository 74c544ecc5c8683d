"""What a read of PyTorch profiler traces gives: per rank (:class:`TraceRank`), per collective
(:class:`CollectiveStat`), and both together (:class:`TraceSummary`). Seconds and bytes throughout."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class OpShape:
    """Time spent in one op signature (op name, input dims and type, as ``record_shapes`` gives them) in a rank's
    window. On a GPU trace it is the summed time of the computation kernels the op launched (linked by their
    ``External id``), classed by the kernel; on a CPU trace the op's self time (its span less its child ops'),
    classed by the op's name (:mod:`slowlink.trace.classes`)."""

    cls: str                    # gemm, attention, elementwise, optimizer, other
    op: str                     # e.g. aten::mm
    dims: list[Any]             # Input Dims, e.g. [[4096, 1024], [1024, 4096]]
    dtype: str | None           # the first input's type, e.g. c10::BFloat16
    calls: int                  # op calls in the window
    time_s: float

    def to_json(self) -> dict[str, Any]:
        return {"class": self.cls, "op": self.op, "dims": self.dims, "dtype": self.dtype, "calls": self.calls,
                "time_s": self.time_s}


@dataclass(frozen=True)
class TraceRank:
    """One rank's trace over its analysed window (:mod:`slowlink.trace.kineto`).

    On a GPU trace every time is HTA's (:mod:`slowlink.trace.kinds`): ``kernel_s`` the span from the first
    kernel's start to the last one's end, ``compute_s``/``communication_s``/``memory_s`` the union of that kind's
    kernels, ``idle_s`` the span less the union of every kernel. On a CPU trace (gloo) the span is the profiled
    steps', communication the gloo collectives' own intervals and compute the CPU ops' union (the module's
    docstring says how)."""

    rank: int
    file: str
    device: str                 # "cuda" (device kernels) or "cpu" (CPU ops only)
    steps: int                  # ProfilerStep#N annotations in the trace
    step_mean_s: float          # mean ProfilerStep#N span
    step_median_s: float        # their median: what a calibration reads (a step stolen by the machine counts less)
    window_steps: int           # steps whose work the times below cover (HTA drops the last one)
    kernel_s: float
    compute_s: float
    communication_s: float
    memory_s: float
    idle_s: float
    comm_comp_overlap: float    # time communication runs alongside computation / communication time (0-1)
    streams: dict[str, float] = field(default_factory=dict)  # GPU: busy seconds per CUDA stream in the window
    # GPU: the computation kernels' summed seconds by class (slowlink.trace.classes: gemm, attention, elementwise,
    # optimizer, other); a sum, not a union, so two streams' overlapping kernels both count
    compute_classes: dict[str, float] = field(default_factory=dict)
    # the time by op signature (OpShape), longest first: which GEMM shapes dominate; empty when the trace has no
    # shapes (record_shapes off) or its kernels cannot be linked to their ops (PyTorch before 2.0)
    shapes: tuple[OpShape, ...] = ()

    @property
    def exposed_comm_s(self) -> float:
        """Communication time no computation hides."""
        return self.communication_s * (1.0 - self.comm_comp_overlap)

    @property
    def comm_compute_ratio(self) -> float:
        """Communication time / computation time (the article's ratio; inf with no computation)."""
        return self.communication_s / self.compute_s if self.compute_s > 0 else float("inf")

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k != "shapes"}
        return {**out, "shapes": [x.to_json() for x in self.shapes]}


@dataclass(frozen=True)
class CollectiveStat:
    """Calls of one collective of one size, dtype and group across the ranks read.

    ``size_bytes`` follows nccl-tests (all_reduce, broadcast, reduce: the buffer; all_gather: the total output;
    reduce_scatter: the total input; all_to_all: the total per rank; send_recv: the message); ``time_s`` is the mean
    duration of a call (the NCCL kernel's, or the gloo collective's on its worker thread), which includes waiting for
    the group's last rank as nccl-tests' time does; busbw = size / time x the op's nccl-tests factor. ``None`` where
    the trace does not record the size (PyTorch before 2.1 records no message sizes on NCCL kernels).

    ``transfer_time_s`` is the mean over the calls of each call's shortest duration across the ranks read: a
    collective ends on every rank together (none has its result before the last rank's data is in), so the rank
    that arrived last waited for nobody and its duration is the transfer, the others' the transfer plus their wait
    for it. ``None`` with one rank's file (or ranks that do not hold the same number of the group's calls)."""

    op: str
    size_bytes: float | None
    dtype: str | None
    group_size: int | None
    group: str | None
    calls: int
    time_s: float
    min_time_s: float           # the fastest call: the one whose group was already there, nearest the transfer
    algbw_bytes_s: float | None
    busbw_bytes_s: float | None
    transfer_time_s: float | None = None  # mean of each call's shortest duration across ranks: no wait in it

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TraceSummary:
    """Every rank's numbers and the collectives of a set of trace files of one job."""

    paths: tuple[str, ...]
    ranks: tuple[TraceRank, ...]
    collectives: tuple[CollectiveStat, ...]
    world_size: int | None
    backend: str | None
    device_name: str | None

    @property
    def step_mean_s(self) -> float:
        """The slowest rank's mean step (a synchronous job runs at its pace)."""
        return max(r.step_mean_s for r in self.ranks)

    @property
    def step_median_s(self) -> float:
        """The slowest rank's median step."""
        return max(r.step_median_s for r in self.ranks)

    def to_json(self) -> dict[str, Any]:
        return {"paths": list(self.paths), "world_size": self.world_size, "backend": self.backend,
                "device_name": self.device_name, "ranks": [r.to_json() for r in self.ranks],
                "collectives": [c.to_json() for c in self.collectives]}
