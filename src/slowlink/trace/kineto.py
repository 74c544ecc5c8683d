"""Read PyTorch profiler (Kineto) traces, one file per rank, into a :class:`~slowlink.trace.result.TraceSummary`.

GPU traces are read as Holistic Trace Analysis reads them (:mod:`slowlink.trace.kinds`), so that each number is
HTA's: when the trace has two or more ``ProfilerStep#N``, only the kernels launched (their ``correlation``'s CPU
call) before the last step starts are kept, as HTA's ``Trace._filter_irrelevant_gpu_kernels`` does (the last
step's kernels may be cut off by the profiler's stop); with fewer, every kernel is. A trace with
nanosecond-resolution times (fractional microseconds) is rounded as HTA rounds it by default
(``trace_parser.round_down_time_stamps``: start = ceil(ts), end = floor(ts + dur), because PyTorch's ns timestamps
made nested events overlap, pytorch/pytorch#122425); a sub-microsecond kernel then counts 0, so on such traces
``memory_s`` (memcpys of a microsecond or two) is well below the kernels' summed durations, as HTA's is.

CPU traces (gloo; ``bench train --profile`` on this machine) have no kernels: there the window is the profiled
steps (first start to last end), communication the union of the gloo collectives' intervals on gloo's worker
threads, computation the union of the CPU ops on every other thread (collective launches and waits, ``c10d::*``,
left out), memory 0 (a CPU copy is an op like another), idle the window less both. The numbers mean what HTA's
mean for a GPU, with the CPU's threads standing for the device's streams; HTA itself reads no CPU trace.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import numpy as np

from slowlink import units
from slowlink.collectives.ops import busbw_factor
from slowlink.errors import SpecError
from slowlink.trace import classes, kinds
from slowlink.trace.collect import CollectiveCall, FileTrace, read_file
from slowlink.trace.result import CollectiveStat, OpShape, TraceRank, TraceSummary

US = 1e-6  # Chrome trace times are microseconds


def trace_files(paths: Sequence[Path]) -> list[Path]:
    """The files named, and every ``*.json``/``*.json.gz`` in a directory named (sorted)."""
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = sorted(q for q in p.iterdir() if q.is_file() and q.name.endswith((".json", ".json.gz")))
            if not found:
                raise SpecError(f"{p}: (a directory with no *.json or *.json.gz) holds no trace")
            files += found
        elif p.is_file():
            files.append(p)
        else:
            raise SpecError(f"{p}: (missing) no such trace file or directory")
    return files


def _steps(ft: FileTrace) -> list[tuple[int, float, float]]:
    """The file's steps in time order; a :class:`SpecError` when there are none or the file mixes runs."""
    if not ft.steps:
        raise SpecError(f"{ft.path}: (no ProfilerStep#N) the trace has no steps: profile with "
                        "torch.profiler.schedule and call prof.step() once per training step")
    steps = sorted(ft.steps, key=lambda s: s[1])
    _one_run(ft, steps)
    return steps


MIXED = "one file must hold one rank's one profiling run: export each rank's trace on its own"


def _one_run(ft: FileTrace, steps: list[tuple[int, float, float]]) -> None:
    """A :class:`SpecError` when one file holds several processes, devices or profiling runs: its steps come from
    more than one process, its kernels ran on more than one device, a step number repeats, or two steps
    overlap (one process runs its steps one after another)."""
    if len(ft.step_pids) > 1:
        raise SpecError(f"{ft.path}: (ProfilerStep#N of {len(ft.step_pids)} processes, pids "
                        f"{', '.join(map(str, sorted(ft.step_pids, key=str)))}) {MIXED}")
    devices = sorted(d for d in ft.devices if d is not None)
    if len(devices) > 1:
        raise SpecError(f"{ft.path}: (kernels on devices {', '.join(map(str, devices))}) {MIXED}")
    again = sorted(n for n, k in Counter(n for n, _, _ in steps).items() if k > 1)
    if again:
        raise SpecError(f"{ft.path}: (ProfilerStep#{again[0]} appears "
                        f"{sum(1 for n, _, _ in steps if n == again[0])} times) {MIXED}")
    for (n0, s0, d0), (n1, s1, _) in pairwise(steps):
        if s1 < s0 + d0:
            raise SpecError(f"{ft.path}: (ProfilerStep#{n1} starts {s0 + d0 - s1:.0f} us before ProfilerStep#{n0} "
                            f"ends) {MIXED}")


def _gpu(ft: FileTrace, steps: list[tuple[int, float, float]]) -> tuple[TraceRank, list[CollectiveCall]]:
    ts, dur = np.frombuffer(ft.kernel_ts, dtype=np.float64), np.frombuffer(ft.kernel_dur, dtype=np.float64)
    launch_ts = np.frombuffer(ft.launch_ts, dtype=np.float64)
    last_start = first_last = max(s for _, s, _ in steps)
    if ft.ns_resolution:
        ts, dur = np.ceil(ts), np.floor(ts + dur) - np.ceil(ts)
        launch_ts, last_start = np.ceil(launch_ts), float(np.ceil(last_start))
    keep = np.ones(ts.size, dtype=bool)
    window_steps = len(steps)
    if len({n for n, _, _ in steps}) >= 2:
        launched = np.frombuffer(ft.launch_corr, dtype=np.int64)[launch_ts < last_start]
        keep = np.isin(np.frombuffer(ft.kernel_corr, dtype=np.int64), launched)
        window_steps = sum(1 for _, s, _ in steps if s < first_last)
    kind_of_name = np.array([kinds.KINDS.index(kinds.kernel_kind(n)) for n in ft.names] or [0], dtype=np.int64)
    kind = kind_of_name[np.frombuffer(ft.kernel_name, dtype=np.int64)][keep]
    start, end = ts[keep], ts[keep] + np.maximum(dur[keep], 0.0)
    if start.size == 0:
        raise SpecError(f"{ft.path}: (no device kernel in the profiled steps) nothing to measure")
    union = {k: kinds.merged(start[kind == i], end[kind == i]) for i, k in enumerate(kinds.KINDS)}
    busy = kinds.length(kinds.merged(start, end))
    span = float(end.max() - start.min())
    comm = kinds.length(union[kinds.COMMUNICATION])
    both = kinds.overlap(union[kinds.COMMUNICATION], union[kinds.COMPUTATION])
    calls = [c for c in ft.collectives if c.kernel is not None and keep[c.kernel]]
    stream = np.frombuffer(ft.kernel_stream, dtype=np.int64)[keep]
    streams = {str(int(x)): kinds.length(kinds.merged(start[stream == x], end[stream == x])) * US
               for x in np.unique(stream)}
    rank = _rank(ft, "cuda", steps, window_steps, span, kinds.length(union[kinds.COMPUTATION]), comm,
                 kinds.length(union[kinds.MEMORY]), span - busy, both / comm if comm > 0 else 0.0)
    computing = kind == kinds.KINDS.index(kinds.COMPUTATION)
    names = np.frombuffer(ft.kernel_name, dtype=np.int64)[keep][computing]
    in_opt = _in_optimizer(ft, np.frombuffer(ft.kernel_corr, dtype=np.int64)[keep][computing])
    ext = np.frombuffer(ft.kernel_ext, dtype=np.int64)[keep][computing]
    op_of = _op_of_ext(ft, ext)
    per = dict.fromkeys(classes.CLASSES, 0.0)
    by_sig: dict[tuple[str, int], tuple[float, set[int]]] = {}
    for name, opt, d, e, sig in zip(names, in_opt, (end - start)[computing], ext, op_of, strict=True):
        cls = classes.classify(ft.names[name], bool(opt))
        per[cls] += float(d) * US
        if sig >= 0:
            t, calls_of = by_sig.setdefault((cls, int(sig)), (0.0, set()))
            calls_of.add(int(e))
            by_sig[cls, int(sig)] = (t + float(d) * US, calls_of)
    shapes = _shapes(ft, {k: (t, len(c)) for k, (t, c) in by_sig.items()})
    return replace(rank, streams=streams, compute_classes=per, shapes=shapes), calls


def _op_of_ext(ft: FileTrace, ext: np.ndarray) -> np.ndarray:
    """The signature (index into ``ft.sigs``) of the shaped op each kernel's External id names; -1 if none."""
    op_ext, op_sig = np.frombuffer(ft.op_ext, dtype=np.int64), np.frombuffer(ft.op_sig, dtype=np.int64)
    if op_ext.size == 0 or ext.size == 0:
        return np.full(ext.size, -1, dtype=np.int64)
    order = np.argsort(op_ext, kind="stable")
    op_ext, op_sig = op_ext[order], op_sig[order]
    i = np.minimum(np.searchsorted(op_ext, ext), op_ext.size - 1)
    found: np.ndarray = np.where(op_ext[i] == ext, op_sig[i], -1)
    return found


def _shapes(ft: FileTrace, times: dict[tuple[str, int], tuple[float, int]]) -> tuple[OpShape, ...]:
    """(class, signature) -> (seconds, calls) as :class:`OpShape` rows, longest first; ops without dims left out."""
    out = []
    for (cls, sig), (t, n) in times.items():
        op, dims, dtype = ft.sigs[sig]
        if dims:
            out.append(OpShape(cls, op, json.loads(dims), dtype, n, t))
    return tuple(sorted(out, key=lambda x: (-x.time_s, x.cls, x.op)))


def _in_optimizer(ft: FileTrace, corr: np.ndarray) -> np.ndarray:
    """Whether each kernel (by its correlation) was launched inside an ``Optimizer.step#...`` span."""
    if not ft.optimizer_spans or corr.size == 0:
        return np.zeros(corr.size, dtype=bool)
    lc, lt = np.frombuffer(ft.launch_corr, dtype=np.int64), np.frombuffer(ft.launch_ts, dtype=np.float64)
    order = np.argsort(lc, kind="stable")
    lc, lt = lc[order], lt[order]
    i = np.minimum(np.searchsorted(lc, corr), max(lc.size - 1, 0))
    found = (lc.size > 0) & (lc[i] == corr)
    spans = np.array(sorted(ft.optimizer_spans))
    j = np.searchsorted(spans[:, 0], lt[i], side="right") - 1
    inside: np.ndarray = found & (j >= 0) & (lt[i] < spans[np.maximum(j, 0), 1])
    return inside


def _cpu(ft: FileTrace, steps: list[tuple[int, float, float]]) -> tuple[TraceRank, list[CollectiveCall]]:
    lo, hi = steps[0][1], max(s + d for _, s, d in steps)
    calls = [c for c in ft.collectives if c.kernel is None and lo <= c.ts_us < hi]
    if not calls:
        raise SpecError(f"{ft.path}: (no device kernel and no CPU collective in the profiled steps) nothing to "
                        "measure: a GPU trace needs ProfilerActivity.CUDA, a CPU one a gloo process group")

    def clipped(s: np.ndarray, e: np.ndarray) -> kinds.Intervals:
        s, e = np.clip(s, lo, hi), np.clip(e, lo, hi)
        return kinds.merged(s[e > s], e[e > s])

    cs = np.array([c.ts_us for c in calls])
    comm = clipped(cs, cs + np.array([c.dur_us for c in calls]))
    starts, ends = [], []
    per = dict.fromkeys(classes.CLASSES, 0.0)
    by_sig: dict[tuple[str, int], tuple[float, int]] = {}
    for tid, (tss, durs, sigs) in ft.cpu_ops.items():
        if tid not in ft.gloo_threads:
            s, d = np.frombuffer(tss, dtype=np.float64), np.frombuffer(durs, dtype=np.float64)
            starts.append(s)
            ends.append(s + d)
            _cpu_self(ft, s, d, np.frombuffer(sigs, dtype=np.int64), (lo, hi), per, by_sig)
    comp = clipped(np.concatenate(starts or [np.empty(0)]), np.concatenate(ends or [np.empty(0)]))
    c_len, p_len = kinds.length(comm), kinds.length(comp)
    both = kinds.overlap(comm, comp)
    span = hi - lo
    idle = span - (c_len + p_len - both)
    rank = _rank(ft, "cpu", steps, len(steps), span, p_len, c_len, 0.0, idle, both / c_len if c_len else 0.0)
    return replace(rank, compute_classes=per, shapes=_shapes(ft, by_sig)), calls


def self_times(ts: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Each op's self time on one thread: its duration less its direct children's (ops that start inside it)."""
    own = dur.astype(np.float64).copy()
    stack: list[int] = []
    for i in np.lexsort((-dur, ts)):
        while stack and ts[i] >= ts[stack[-1]] + dur[stack[-1]]:
            stack.pop()
        if stack:
            own[stack[-1]] -= dur[i]
        stack.append(int(i))
    return np.maximum(own, 0.0)


def _cpu_self(ft: FileTrace, ts: np.ndarray, dur: np.ndarray, sigs: np.ndarray, window: tuple[float, float],
              per: dict[str, float], by_sig: dict[tuple[str, int], tuple[float, int]]) -> None:
    """Add one thread's ops in ``window`` to the class totals and the signature totals, by self time."""
    own = self_times(ts, dur)
    spans = sorted(ft.optimizer_spans)
    for t, o, sig in zip(ts, own, sigs, strict=True):
        if not window[0] <= t < window[1]:
            continue
        opt = any(a <= t < b for a, b in spans)
        cls = classes.classify(ft.sigs[sig][0], opt)
        per[cls] += float(o) * US
        old_t, old_n = by_sig.get((cls, int(sig)), (0.0, 0))
        by_sig[cls, int(sig)] = (old_t + float(o) * US, old_n + 1)


def _rank(ft: FileTrace, device: str, steps: list[tuple[int, float, float]], window_steps: int, span: float,
          compute: float, comm: float, memory: float, idle: float, ovl: float) -> TraceRank:
    return TraceRank(rank=ft.rank if ft.rank is not None else -1, file=ft.path, device=device, steps=len(steps),
                     step_mean_s=float(np.mean([d for _, _, d in steps])) * US,
                     step_median_s=float(np.median([d for _, _, d in steps])) * US, window_steps=window_steps,
                     kernel_s=span * US, compute_s=compute * US, communication_s=comm * US, memory_s=memory * US,
                     idle_s=max(0.0, idle) * US, comm_comp_overlap=min(1.0, max(0.0, ovl)))


def analyse(ft: FileTrace) -> tuple[TraceRank, list[CollectiveCall]]:
    """One file's :class:`TraceRank` and the collective calls in its window (module docstring)."""
    steps = _steps(ft)
    return _gpu(ft, steps) if len(ft.kernel_ts) else _cpu(ft, steps)


def call_size_bytes(call: CollectiveCall, group_size: int | None) -> float | None:
    """nccl-tests' size of a call (:class:`~slowlink.trace.result.CollectiveStat`): all_gather's total output (its
    output elements, or its input's times the group), every other op's input; None without elements or dtype."""
    elem = units.TRACE_DTYPE_BYTES.get(call.dtype or "")
    if elem is None or call.in_elems is None:
        return None
    if call.op == "all_gather":
        out = call.out_elems if call.out_elems is not None else (call.in_elems * group_size if group_size else None)
        return None if out is None else float(out * elem)
    return float(call.in_elems * elem)


_Key = tuple[str, float | None, str | None, int | None, str | None]


def collective_stats(by_rank: Sequence[Sequence[CollectiveCall]], world: int | None) -> tuple[CollectiveStat, ...]:
    """Each rank's calls (one sequence per file) grouped by op, size, dtype and group; mean time; algbw = size /
    time; busbw = algbw x :func:`slowlink.collectives.ops.busbw_factor` (nccl-tests doc/PERFORMANCE.md); and the
    transfer time (:class:`~slowlink.trace.result.CollectiveStat`): where two or more files hold the same number of
    calls of a group, the k-th call of each is one collective (every rank of a group issues its collectives in the
    same order), and the shortest of its durations, the last rank to arrive's, is that collective's transfer."""
    groups: dict[_Key, list[float]] = defaultdict(list)
    per_file: list[dict[_Key, list[float]]] = []
    for calls in by_rank:
        mine: dict[_Key, list[float]] = defaultdict(list)
        for c in sorted(calls, key=lambda c: c.ts_us):
            n = c.group_size if c.group_size is not None else world
            key = (c.op, call_size_bytes(c, n), c.dtype, n, c.group)
            groups[key].append(c.dur_us * US)
            mine[key].append(c.dur_us * US)
        per_file.append(mine)
    out = []
    for key, times in groups.items():
        op, size, dtype, n, group = key
        t = float(np.mean(times))
        algbw = size / t if size is not None and t > 0 else None
        busbw = algbw * busbw_factor(op, n) if algbw is not None and n else None
        ranks = [f[key] for f in per_file if key in f]
        same = len(ranks) > 1 and len({len(r) for r in ranks}) == 1
        transfer = float(np.mean(np.min(np.array(ranks), axis=0))) if same else None
        out.append(CollectiveStat(op, size, dtype, n, group, len(times), t, min(times), algbw, busbw, transfer))
    return tuple(sorted(out, key=lambda s: (-s.calls * s.time_s, s.op)))


def _job(files: list[FileTrace]) -> tuple[int | None, str | None]:
    """The job's world size and backend; a :class:`SpecError` when the files are not the ranks of one job."""
    def info(ft: FileTrace) -> dict[str, object]:
        d = ft.meta.get("distributedInfo")
        return d if isinstance(d, dict) else {}

    worlds, backends = {info(ft).get("world_size") for ft in files}, {info(ft).get("backend") for ft in files}
    if len(worlds) > 1 or len(backends) > 1:
        got = ", ".join(f"{Path(ft.path).name}: world_size {info(ft).get('world_size')!r}, backend "
                        f"{info(ft).get('backend')!r}" for ft in files)
        raise SpecError(f"traces ({got}) are not of one job: every file must have the same distributedInfo "
                        "world_size and backend")
    seen: dict[int, str] = {}
    for ft in files:
        if ft.rank is not None:
            if ft.rank in seen:
                raise SpecError(f"{ft.path}: (rank {ft.rank}, as {seen[ft.rank]}) two files of the same rank: "
                                "read the files of one run")
            seen[ft.rank] = ft.path
    numbers = [{n for n, _, _ in ft.steps} for ft in files]
    if numbers and all(numbers) and not set.intersection(*numbers):
        got = ", ".join(f"{Path(ft.path).name}: {min(n)}-{max(n)}" for ft, n in zip(files, numbers, strict=True))
        raise SpecError(f"traces (ProfilerStep numbers {got}) are not of one run: the ranks of one job profile the "
                        "same steps, so their files share step numbers")
    kinds_of = {bool(len(ft.kernel_ts)) for ft in files}
    if len(kinds_of) > 1:
        raise SpecError("traces (some with device kernels, some without) are not of one job: read the GPU run's "
                        "files or the CPU run's, not both")
    world, backend = worlds.pop(), backends.pop()
    return world if isinstance(world, int) else None, str(backend) if backend else None


def read_kineto(paths: Sequence[Path], max_bytes: int | None = None) -> TraceSummary:
    """Every rank's :class:`TraceRank` and the job's collectives from trace files or directories of them."""
    files = [read_file(p, max_bytes) for p in trace_files(paths)]
    world, backend = _job(files)
    ranks, calls = [], []
    for i, ft in enumerate(files):
        rank, mine = analyse(ft)
        ranks.append(rank if ft.rank is not None else replace(rank, rank=i))
        calls.append(mine)
    dev = files[0].meta.get("deviceProperties")
    name = dev[0].get("name") if isinstance(dev, list) and dev and isinstance(dev[0], dict) else None
    return TraceSummary(tuple(ft.path for ft in files), tuple(sorted(ranks, key=lambda r: r.rank)),
                        collective_stats(calls, world), world, backend, str(name) if name else None)
