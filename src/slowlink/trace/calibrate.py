"""A plan calibrated by a measured run: the trace's collectives scale the collective model op by op, and its
step scales the step model's compute, on the cluster the trace ran on; the chain then answers for another cluster
with both calibrations applied.

  comm scale (op)  = sum over the op's traced calls of its size's fastest call / sum of the model's times for
                     the same calls (op, nccl-tests size, group of that many consecutive ranks) on the trace's
                     cluster; the fastest call, because in a training step a collective's time includes waiting
                     for the group's last rank, which is compute skew, not the network
  compute scale k  = the k for which the step model on the trace's cluster, its compute k times slower (GEMM
                     fraction / k, memory and elementwise bandwidth / k, AdamW time x k) and its collectives
                     scaled as above, returns the trace's step (the slowest rank's median ProfilerStep: a step
                     the machine stole from, a GC pause or the profiler's own flush, moves a mean, not a median):
                     found by bisection, so the round trip on the trace's own cluster returns the trace's step

What the calibrated compute stands for: everything in the measured step that is not a modelled collective's
exposed time (kernels, launch gaps and host time alike); the trace's own compute/communication split is reported
beside it. Collectives the model prices but the trace has no sized call of stay modelled, and are named so.

On a cluster with another GPU the compute is replaced op by op (:mod:`slowlink.trace.predict`): the slowest rank's
computation per step, class by class and GEMM shape by shape, times the two GPUs' rate ratios; the calibrated
compute's share that no kernel measured (launch gaps, host time; what exceeds the kernels' sum) is kept as is:

  compute on GPU g = C - K + K x (predicted / measured kernels),  K = min(measured kernels, C)
    C = the calibrated compute per step on the trace's cluster (the step model's at k)
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
from slowlink.workload.step import plan

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
class TraceCalibration:
    """The trace's calibrations of the compute and of each collective op, and what was measured or modelled."""

    summary: TraceSummary
    trace_cluster: str
    trace_cost: CommCost            # the collective model on the trace's cluster, uncalibrated
    trace_gpus: int
    compute_scale: float
    comm_scale: dict[str, float]
    measured: tuple[Term, ...]
    modelled_ops: tuple[str, ...]
    workload: Workload              # the traced workload, its dp fitted to the trace's cluster
    traced_on: Cluster              # the trace's cluster, uncalibrated
    rank: TraceRank                 # the slowest rank: the one whose computation is moved to another GPU
    calibrated_compute_s: float     # C: the step model's compute per step at compute_scale on the trace's cluster

    def prediction(self, gpu: Gpu) -> ComputePrediction:
        """The slowest rank's computation moved to ``gpu``, class by class (:mod:`slowlink.trace.predict`)."""
        return predict(self.rank, self.traced_on.gpu, gpu, self.workload.training.precision)

    def compute_on_s(self, gpu: Gpu) -> float:
        """The compute per step on ``gpu`` (module docstring): C - K + K x predicted / measured."""
        kernels = min(self.prediction(gpu).measured_s, self.calibrated_compute_s)
        return self.calibrated_compute_s - kernels + kernels * self.prediction(gpu).ratio

    def scale_on(self, gpu: Gpu) -> float:
        """The compute scale for ``gpu``: :attr:`compute_scale` on the trace's GPU, else the k for which the step
        model on the trace's cluster with ``gpu`` returns :meth:`compute_on_s`."""
        if gpu == self.traced_on.gpu:
            return self.compute_scale
        there = replace(self.traced_on, gpu=gpu)
        return _bisect(lambda k: plan(self.workload, slower(there, k), self.trace_cost, check_memory=False).compute_s,
                       self.compute_on_s(gpu), "compute on " + gpu.name)

    def cluster(self, c: Cluster) -> Cluster:
        """``c`` with its GPU's compute :meth:`scale_on` times slower (module docstring)."""
        return slower(c, self.scale_on(c.gpu))

    def comm_cost(self, c: Cluster, base: CommCost | None = None) -> CommCost:
        """The collective model of ``c`` (``base``, default analytical) with the trace's calibration: an op the
        trace ran slower than its model (scale > 1: the software, e.g. gloo's CPU reduction, is the bottleneck)
        takes the slower of ``c``'s model and the calibrated time on the trace's cluster for a group of that size,
        so a faster fabric gains nothing past what the software reached and a slower one is priced by its links;
        an op the trace ran faster than its model is scaled (scale < 1). On the trace's cluster both give the
        calibrated time."""
        target = base if base is not None else analytical_cost(c)
        trace_cost, scale, most = self.trace_cost, self.comm_scale, self.trace_gpus

        def cost(op: str, size_bytes: float, groups: Sequence[list[int]]) -> float:
            t = target(op, size_bytes, groups)
            k = scale.get(op)
            if k is None or not groups:
                return t
            if k < 1:
                return t * k
            same = [list(range(min(len(groups[0]), most)))]
            return max(t, k * trace_cost(op, size_bytes, same))

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


def scaled(base: CommCost, scale: dict[str, float], asked: set[str] | None = None) -> CommCost:
    """``base`` with op ``op``'s time x ``scale[op]``; the ops asked for are added to ``asked``."""

    def cost(op: str, size_bytes: float, groups: Sequence[list[int]]) -> float:
        if asked is not None and groups and len(groups[0]) > 1 and size_bytes > 0:
            asked.add(op)
        return base(op, size_bytes, groups) * scale.get(op, 1.0)

    return cost


def comm_scales(s: TraceSummary, base: CommCost) -> tuple[dict[str, float], list[Term]]:
    """Per op: measured / modelled time over the trace's sized calls (module docstring)."""
    measured: dict[str, float] = {}
    model: dict[str, float] = {}
    calls: dict[str, int] = {}
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
    scale = {op: measured[op] / model[op] for op in measured}
    rank_steps = max(sum(r.window_steps for r in s.ranks), 1)  # every rank's calls are in the trace
    terms = [Term(f"collective {op}", measured[op] / rank_steps, model[op] / rank_steps, scale[op],
                  f"per step and rank: {calls[op]} calls in {rank_steps} rank-steps, each at its size's fastest "
                  "call (the others include waiting for the group's last rank)")
             for op in sorted(scale)]
    return scale, terms


def _bisect(step_of: Callable[[float], float], target_s: float, what: str = "step") -> float:
    lo, hi = K_LOW, K_HIGH
    if not step_of(lo) <= target_s <= step_of(hi):
        raise SpecError(f"trace: {what} ({target_s:.4g} s) cannot be reached by scaling the model's compute between "
                        f"{K_LOW:g}x and {K_HIGH:g}x: is the workload the traced job?")
    for _ in range(ITERATIONS):
        mid = float((lo * hi) ** 0.5)
        lo, hi = (mid, hi) if step_of(mid) < target_s else (lo, mid)
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
    comm, terms = comm_scales(s, base_cost)
    asked: set[str] = set()
    w = fit_dp(w, trace_cluster)

    def step_of(k: float) -> float:
        return plan(w, slower(trace_cluster, k), scaled(base_cost, comm, asked), check_memory=False).step_time_s

    target = s.step_median_s
    k = _bisect(step_of, target)
    at_k = plan(w, slower(trace_cluster, k), scaled(base_cost, comm), check_memory=False)
    slowest = max(s.ranks, key=lambda r: r.step_mean_s)
    per = max(slowest.window_steps, 1)
    terms = [Term("step", target, at_k.step_time_s, None, "the slowest rank's median ProfilerStep"),
             Term("compute", slowest.compute_s / per, at_k.compute_s, k,
                  "measured: the trace's computation per step (HTA's compute); model: the step model's compute, "
                  "scaled so that the step matches (idle and host time included)"),
             *terms]
    return TraceCalibration(s, trace_cluster.name, base_cost, trace_cluster.gpus, k, comm,
                            tuple(terms), tuple(sorted(asked - set(comm))), w, trace_cluster, slowest,
                            at_k.compute_s)


def calibrate_files(paths: list[Path], w: Workload, trace_cluster: Cluster, fidelity: str = "analytical"
                    ) -> TraceCalibration:
    """Read the traces (:func:`slowlink.trace.kineto.read_kineto`) and :func:`calibrate` ``w`` on the cluster
    they ran on, pricing collectives at ``fidelity``."""
    from slowlink.sim.fidelity import comm_cost
    from slowlink.trace.kineto import read_kineto

    return calibrate(read_kineto(paths), w, trace_cluster, comm_cost(fidelity, trace_cluster))
