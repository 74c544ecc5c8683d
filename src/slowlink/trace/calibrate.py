"""A plan calibrated by a measured run: the trace's compute and collectives calibrate the step model on the cluster
the trace ran on; the chain then answers for another cluster with the calibrations applied.

Per step of the slowest rank (the one whose median ProfilerStep is the step: a step the machine stole from, a GC
pause or the profiler's own flush, moves a mean, not a median), the traced step T is split into what the trace
measured and what the model adds:

  T = compute C + exposed communication E + residual R

  compute C        MEASURED: the trace's own computation per step (HTA's compute: the union of the computation
                   kernels on a GPU; on a CPU trace the union of the compute thread's ops, the optimizer's included).
                   The step model's compute (its compute and optimizer time) is matched to it: the k for which the
                   model's compute k times slower (GEMM fraction / k, memory and elementwise bandwidth / k, AdamW
                   time x k) is C, found by bisection
  comm scale (op)  MODELLED, calibrated op by op: sum over the op's traced calls of its size's fastest call / sum of
                   the model's times for the same calls (op, nccl-tests size, group of that many consecutive ranks)
                   on the trace's cluster; the fastest call, because in a training step a collective's time includes
                   waiting for the group's last rank, which is compute skew, not the network. E_model is the step
                   model's exposed communication with those collectives, at k
  residual R       T - the step model's step at k with those collectives: what neither the measured compute nor the
                   modelled communication holds. Reported beside E_meas, the trace's exposed communication per step
                   (a collective runs and no computation does), and the trace's idle time (no op or kernel runs)

Why the measured compute and not the residual: a compute scale fitted so that the model returns the traced step
(the earlier calibration) is an inversion that puts every error of T into C. When communication dominates T (a
50 Mbit/s link: 57 ms of step, 5 ms of compute), the collectives' spread around their fastest call (3-5 ms there)
and its idle time become compute (the emulated cluster's traces: a compute scale of 2.0-3.3 fitted against
0.9-2.0 measured), which a faster fabric, where compute is a quarter of the step and not a tenth, then exposes
whole (50 -> 200 Mbit/s: +15% on average over ten runs on a quiet machine, +30% at worst; docs/trace.md). The
measured compute has no such amplification: it is read, not inferred, whatever the share of communication, so it
is used always; a trace with no measured compute (or one the model's compute cannot reach between K_LOW and
K_HIGH) falls back to the inversion and says so.

How the residual is carried to another cluster: its parts as what they are, from the trace's own numbers.

  communication    each calibrated collective's time x g(op), g = the op's mean transfer / its fastest call, where a
                   call's transfer is its shortest duration across the ranks read (the last rank to arrive waited for
                   nobody: :class:`~slowlink.trace.result.CollectiveStat`). That spread (transfers slower than the
                   fastest one: 1.05-1.10 x at 50-200 Mbit/s in the emulated cluster's traces) is time a collective
                   transfers, so as far as the link's model it is carried in proportion to the collective model: on a
                   rate-limited link a longer transfer varies by as much in proportion. What the calls take past the
                   link's model (scale x g > 1: the link allows less time than they took; at 400 Mbit/s there, 1.2-1.5
                   x the fastest, transfers of 6 or of 8-13 ms) is not the link's pace (losses and their recovery, the
                   software) and is added as is, as an op slower than its model already is (:meth:`comm_cost`). g = 1
                   with one rank's file (no call to match)
  host             the rest, kept as is on the compute thread: the calibrated compute C' is C + host (k again by
                   bisection, now so that the step at k with the collectives x g is T, so the round trip on the
                   trace's cluster returns T by construction). It holds what no fabric changes: idle time (launch
                   gaps, Python between ops, the profiler's flush), the wait for the group's last rank (the other
                   ranks' compute and host jitter), and the median step against the window's mean. On another GPU
                   only the measured C moves with the rates (below); the host time stays

Collectives the model prices but the trace has no sized call of stay modelled, and are named so.

On a cluster with another GPU the compute is replaced op by op (:mod:`slowlink.trace.predict`): the slowest rank's
computation per step, class by class and GEMM shape by shape, times the two GPUs' rate ratios; the calibrated
compute's share that no kernel measured (the host time; what exceeds the kernels' sum) is kept as is:

  compute on GPU g = C' - K + K x (predicted / measured kernels),  K = min(measured kernels, C')
    C' = the calibrated compute per step on the trace's cluster (the step model's compute and optimizer at k)
  and the chain runs with the k_g for which the step model, on the trace's cluster with GPU g, gives that compute
  (bisection again), so a cluster of another size or layout still gets the model's scaling of it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from slowlink.catalog import Gpu
from slowlink.errors import SpecError
from slowlink.spec.cluster import Cluster
from slowlink.spec.workload import Workload
from slowlink.trace.predict import ComputePrediction, predict
from slowlink.trace.result import TraceRank, TraceSummary
from slowlink.workload.comm import CommCost, analytical_cost
from slowlink.workload.step import StepResult, plan

K_LOW, K_HIGH, ITERATIONS = 1e-3, 1e3, 60


@dataclass(frozen=True)
class Term:
    """One term of the step: measured from the trace or modelled, with both values where both exist."""

    term: str
    measured_s: float | None
    model_s: float | None
    scale: float | None
    note: str

    def to_json(self) -> dict[str, Any]:
        return {"term": self.term, "measured_s": self.measured_s, "model_s": self.model_s, "scale": self.scale,
                "note": self.note}


@dataclass(frozen=True)
class StepTerm:
    """One term of the traced step (module docstring): what the trace measured, what the model gives on the trace's
    cluster, the residual between them, and how the term is carried to another cluster. Seconds per step."""

    term: str                   # compute, exposed communication, host, step
    measured_s: float | None    # the trace's (None: the trace has no such number)
    modelled_s: float | None    # the step model's on the trace's cluster, with the measured compute
    residual_s: float | None    # what the chain carries beyond the model: measured - modelled where both exist
    carried: str                # how the term is carried to another cluster

    def to_json(self) -> dict[str, Any]:
        return {"term": self.term, "measured_s": self.measured_s, "modelled_s": self.modelled_s,
                "residual_s": self.residual_s, "carried": self.carried}


@dataclass(frozen=True)
class TraceCalibration:
    """The trace's calibrations of the compute and of each collective op, and what was measured or modelled."""

    summary: TraceSummary
    trace_cluster: str
    trace_cost: CommCost            # the collective model on the trace's cluster, uncalibrated
    trace_gpus: int
    compute_scale: float
    comm_scale: dict[str, float]    # per op: the fastest calls / the model (module docstring)
    measured: tuple[Term, ...]
    modelled_ops: tuple[str, ...]
    workload: Workload              # the traced workload, its dp fitted to the trace's cluster
    traced_on: Cluster              # the trace's cluster, uncalibrated
    rank: TraceRank                 # the slowest rank: the one whose computation is moved to another GPU
    calibrated_compute_s: float     # C': the step model's compute and optimizer per step at compute_scale there
    measured_compute_scale: float   # the k at which the step model's compute is the trace's measured compute
    comm_spread: dict[str, float]   # g per op: its calls' mean transfer / its fastest call (module docstring)
    residual_s: float               # R: the traced step - the model's at measured_compute_scale, fastest calls
    terms: tuple[StepTerm, ...]     # the step split into measured, modelled and residual (module docstring)

    def prediction(self, gpu: Gpu) -> ComputePrediction:
        """The slowest rank's computation moved to ``gpu``, class by class (:mod:`slowlink.trace.predict`)."""
        return predict(self.rank, self.traced_on.gpu, gpu, self.workload.training.precision)

    def compute_on_s(self, gpu: Gpu) -> float:
        """The compute per step on ``gpu`` (module docstring): C' - K + K x predicted / measured."""
        kernels = min(self.prediction(gpu).measured_s, self.calibrated_compute_s)
        return self.calibrated_compute_s - kernels + kernels * self.prediction(gpu).ratio

    def scale_on(self, gpu: Gpu) -> float:
        """The compute scale for ``gpu``: :attr:`compute_scale` on the trace's GPU, else the k for which the step
        model on the trace's cluster with ``gpu`` returns :meth:`compute_on_s`."""
        if gpu == self.traced_on.gpu:
            return self.compute_scale
        there = replace(self.traced_on, gpu=gpu)
        return _bisect(lambda k: thread_s(plan(self.workload, slower(there, k), self.trace_cost, check_memory=False)),
                       self.compute_on_s(gpu), "compute on " + gpu.name)

    def cluster(self, c: Cluster) -> Cluster:
        """``c`` with its GPU's compute :meth:`scale_on` times slower (module docstring)."""
        return slower(c, self.scale_on(c.gpu))

    def comm_cost(self, c: Cluster, base: CommCost | None = None) -> CommCost:
        """The collective model of ``c`` (``base``, default analytical) with the trace's calibration: an op the
        trace ran slower than its model (scale > 1: the software, e.g. gloo's CPU reduction, is the bottleneck)
        takes the slower of ``c``'s model and the calibrated time on the trace's cluster for a group of that size,
        so a faster fabric gains nothing past what the software reached and a slower one is priced by its links;
        an op the trace ran faster than its model is scaled (scale < 1). Its transfers' spread g
        (:attr:`comm_spread`) is carried in proportion (x g) as far as the link's model: past it (scale x g > 1 with
        scale < 1) the excess over the model, not the link's (module docstring), is added as the trace's cluster
        had it; a software-bound op's calibrated time is x g. On the trace's cluster every case gives the
        calibrated time x g."""
        target = base if base is not None else analytical_cost(c)
        trace_cost, scale, most, spread = self.trace_cost, self.comm_scale, self.trace_gpus, self.comm_spread

        def cost(op: str, size_bytes: float, groups: Sequence[list[int]]) -> float:
            t = target(op, size_bytes, groups)
            k = scale.get(op)
            if k is None or not groups:
                return t
            g = spread.get(op, 1.0)
            same = [list(range(min(len(groups[0]), most)))]
            if k * g <= 1:
                return t * k * g
            if k < 1:
                return t + (k * g - 1) * trace_cost(op, size_bytes, same)
            return max(t, k * trace_cost(op, size_bytes, same)) * g

        return cost

    def to_json(self, c: Cluster | None = None) -> dict[str, Any]:
        """The calibration, and with a target cluster ``c`` its compute by class there."""
        target = self.traced_on.gpu if c is None else c.gpu
        pred = self.prediction(target)
        return {"path": list(self.summary.paths), "ranks": len(self.summary.ranks),
                "steps": max(r.steps for r in self.summary.ranks), "cluster": self.trace_cluster,
                "compute_scale": self.compute_scale, "gpu": pred.trace_gpu, "target_gpu": pred.target_gpu,
                "target_compute_scale": self.scale_on(target), "compute_s": self.calibrated_compute_s,
                "target_compute_s": self.compute_on_s(target), "compute_classes": pred.to_json(),
                "measured_compute_scale": self.measured_compute_scale, "comm_spread": self.comm_spread,
                "residual_s": self.residual_s, "terms": [t.to_json() for t in self.terms],
                "measured": [t.to_json() for t in self.measured],
                "modelled": [f"collective {op}: no sized call in the trace" for op in self.modelled_ops]
                + ["pipeline bubble, data stall, failures and cost: the chain's models"]}


def slower(c: Cluster, k: float) -> Cluster:
    """``c`` with every compute rate of its GPU divided by ``k`` (peak FLOP/s untouched, so MFU keeps its
    meaning)."""
    g = c.gpu
    frac = {p: g.gemm_share(p) / k for p in g.peak_flops}
    gpu = replace(g, gemm_fraction=frac, hbm_bw_bytes_s=g.hbm_bw_bytes_s / k,
                  elementwise_bw=None if g.elementwise_bw is None else g.elementwise_bw / k,
                  adam_s_per_param=None if g.adam_s_per_param is None else g.adam_s_per_param * k)
    return replace(c, gpu=gpu)


def thread_s(r: StepResult) -> float:
    """The step model's work on the compute thread: its compute and its optimizer (what a trace's compute holds)."""
    return r.compute_s + r.optimizer_s


def scaled(base: CommCost, scale: dict[str, float], asked: set[str] | None = None,
           spread: dict[str, float] | None = None) -> CommCost:
    """``base`` with op ``op``'s time x ``scale[op]`` x ``spread[op]``; the ops asked for are added to ``asked``."""
    spread = spread or {}

    def cost(op: str, size_bytes: float, groups: Sequence[list[int]]) -> float:
        if asked is not None and groups and len(groups[0]) > 1 and size_bytes > 0:
            asked.add(op)
        return base(op, size_bytes, groups) * scale.get(op, 1.0) * spread.get(op, 1.0)

    return cost


def comm_scales(s: TraceSummary, base: CommCost) -> tuple[dict[str, float], dict[str, float], list[Term]]:
    """Per op: measured / modelled time over the trace's sized calls, and the spread g of its transfers over the
    fastest call (module docstring)."""
    measured: dict[str, float] = {}
    model: dict[str, float] = {}
    calls: dict[str, int] = {}
    transfer: dict[str, list[float]] = {}   # per op: sum of transfer x calls, sum of fastest x calls
    for c in s.collectives:
        n = c.group_size or s.world_size
        if c.size_bytes is None or not n or n < 2:
            continue
        t = base(c.op, c.size_bytes, [list(range(n))])
        if t <= 0:
            continue
        measured[c.op] = measured.get(c.op, 0.0) + c.min_time_s * c.calls
        model[c.op] = model.get(c.op, 0.0) + t * c.calls
        calls[c.op] = calls.get(c.op, 0) + c.calls
        if c.transfer_time_s is not None and c.min_time_s > 0:
            x = transfer.setdefault(c.op, [0.0, 0.0])
            x[0] += c.transfer_time_s * c.calls
            x[1] += c.min_time_s * c.calls
    scale = {op: measured[op] / model[op] for op in measured}
    spread = {op: t / fastest for op, (t, fastest) in transfer.items()}
    rank_steps = max(sum(r.window_steps for r in s.ranks), 1)  # every rank's calls are in the trace
    terms = [Term(f"collective {op}", measured[op] / rank_steps, model[op] / rank_steps, scale[op],
                  f"per step and rank: {calls[op]} calls in {rank_steps} rank-steps, each at its size's fastest "
                  "call (the others include waiting for the group's last rank); "
                  + (f"their transfers (each call's shortest duration across ranks) x{spread[op]:.3g} the fastest"
                     if op in spread else "no transfer time (one rank's file): spread 1"))
             for op in sorted(scale)]
    return scale, spread, terms


def _bisect(step_of: Callable[[float], float], target_s: float, what: str = "step") -> float:
    k = _solve(step_of, target_s)
    if k is None:
        raise SpecError(f"trace: {what} ({target_s:.4g} s) cannot be reached by scaling the model's compute between "
                        f"{K_LOW:g}x and {K_HIGH:g}x: is the workload the traced job?")
    return k


def _solve(f: Callable[[float], float], target: float) -> float | None:
    """The x in [K_LOW, K_HIGH] at which the non-decreasing ``f`` is ``target`` (geometric bisection); None if
    ``target`` is outside f's range there."""
    lo, hi = K_LOW, K_HIGH
    if not f(lo) <= target <= f(hi):
        return None
    for _ in range(ITERATIONS):
        mid = float((lo * hi) ** 0.5)
        lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
    return float((lo * hi) ** 0.5)


def calibrate(s: TraceSummary, w: Workload, trace_cluster: Cluster, base: CommCost | None = None
              ) -> TraceCalibration:
    """The calibrations of ``s`` (a trace of ``w`` on ``trace_cluster``), as the module docstring defines them."""
    from slowlink.workload.step import fit_dp

    if s.world_size is not None and s.world_size != trace_cluster.gpus:
        raise SpecError(f"--trace-cluster ({trace_cluster.name}: {trace_cluster.gpus} GPUs) must be the cluster the "
                        f"trace ran on: the trace's world_size is {s.world_size}")
    on_gpu = any(r.device == "cuda" for r in s.ranks)
    if on_gpu == (trace_cluster.gpu.arch == "cpu"):
        ran = f"GPU kernels ({s.device_name or 'device unnamed'})" if on_gpu else "CPU ops only"
        raise SpecError(f"--trace-cluster ({trace_cluster.name}: gpu {trace_cluster.gpu.name}, arch "
                        f"{trace_cluster.gpu.arch}) must be the cluster the trace ran on: the trace has {ran}")
    base_cost = base if base is not None else analytical_cost(trace_cluster)
    comm, spread, terms = comm_scales(s, base_cost)
    asked: set[str] = set()
    w = fit_dp(w, trace_cluster)

    def at(k: float, g: dict[str, float] | None = None) -> StepResult:
        return plan(w, slower(trace_cluster, k), scaled(base_cost, comm, asked, g), check_memory=False)

    target = s.step_median_s
    slowest = max(s.ranks, key=lambda r: r.step_median_s)  # the rank whose median step is the traced step
    per = max(slowest.window_steps, 1)
    c_meas, e_meas = slowest.compute_s / per, slowest.exposed_comm_s / per
    uncalibrated = thread_s(at(1.0))
    k_meas = _solve(lambda k: thread_s(at(k)), c_meas) if c_meas > 0 else None
    matched = k_meas is not None
    if k_meas is None:  # no compute measured (or out of the model's reach): the step's inversion, as before
        k_meas = _bisect(lambda k: at(k).step_time_s, target)
        how = "none measured, or out of reach: fitted so that the step model returns the traced step"
    else:
        how = "the trace's measured compute"
    first = at(k_meas)
    residual = target - first.step_time_s
    k = _bisect(lambda x: at(x, spread).step_time_s, target)
    at_k = at(k, spread)
    comm_rest = at(k_meas, spread).exposed_comm_s - first.exposed_comm_s
    host = thread_s(at_k) - thread_s(first)  # what the compute thread holds beyond the measured compute
    g = ", ".join(f"{op} x{x:.3g}" for op, x in sorted(spread.items())) or "none: no rank's call matched to another's"
    steps = [
        StepTerm("compute", c_meas, thread_s(first), 0.0 if matched else None,
                 f"matched: x{k_meas:.3g} the model's {uncalibrated:.4g} s ({how}); moved to another GPU class by "
                 "class (slowlink.trace.predict)"),
        StepTerm("exposed communication", e_meas, first.exposed_comm_s, comm_rest,
                 f"modelled: the calibrated collectives at their fastest calls; residual: their transfers' spread "
                 f"over the fastest ({g}), carried in proportion to the collective model"),
        StepTerm("host", (slowest.idle_s + slowest.memory_s) / per, None, host,
                 "measured: no op or kernel runs (launch gaps, host time, the profiler) and memory copies; residual: "
                 "the rest of the traced step (these, the wait for the group's last rank, the median step against "
                 "the mean), kept as is on the compute thread"),
        StepTerm("step", target, first.step_time_s, residual, "the slowest rank's median ProfilerStep; modelled: the "
                 "step model with the measured compute and the collectives' fastest calls; residual: communication "
                 "and host"),
    ]
    terms = [Term("step", target, at_k.step_time_s, None, "the slowest rank's median ProfilerStep"),
             Term("compute", c_meas, thread_s(at_k), k,
                  "measured: the trace's computation per step (HTA's compute); model: the step model's compute and "
                  "optimizer as calibrated, the measured compute with the host time"),
             *terms]
    return TraceCalibration(s, trace_cluster.name, base_cost, trace_cluster.gpus, k, comm,
                            tuple(terms), tuple(sorted(asked - set(comm))), w, trace_cluster, slowest,
                            thread_s(at_k), k_meas, spread, residual, tuple(steps))


def calibrate_files(paths: list[Path], w: Workload, trace_cluster: Cluster, fidelity: str = "analytical"
                    ) -> TraceCalibration:
    """Read the traces (:func:`slowlink.trace.kineto.read_kineto`) and :func:`calibrate` ``w`` on the cluster
    they ran on, pricing collectives at ``fidelity``."""
    from slowlink.sim.fidelity import comm_cost
    from slowlink.trace.kineto import read_kineto

    return calibrate(read_kineto(paths), w, trace_cluster, comm_cost(fidelity, trace_cluster))
