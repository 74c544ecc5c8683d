"""Discrete-event simulation of a shared GPU cluster on SimPy: arrivals, queueing, placement, sharing, deadlock.

Events are job arrivals and job completions; after each, the scheduler makes one pass over the first
``window`` waiting jobs. Two schedulers:

* **gang**: a job starts only when all its GPUs can be placed at once (:mod:`slowlink.share.alloc`); with
  backfill a later job may start when an earlier one does not fit.
* **per-gpu**: each free GPU goes to the next pending rank (pod), as a scheduler that places pods one by one;
  a distributed job holds the GPUs it got until it has them all. Pods are ordered by (submission time, rank
  index): pods of jobs submitted at the same moment interleave, as their controllers create them at once.
  Two such jobs can each end up holding part of what they need with nothing left to free: a deadlock
  (Coffman's hold-and-wait with no preemption), reported with the jobs and what each holds; the run stops.

A running job progresses at a rate (1 = alone on whole GPUs): on a MIG instance smaller than the compute it
uses, ``instance SM fraction / compute_fraction``; time-sliced with other busy contexts, its max-min fair
share of the GPU over its demand, times the time-slicing efficiency; a distributed job at the rate of its
slowest GPU. Rates change when neighbours come and go; completion events are rescheduled then.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from itertools import islice

import numpy as np
import simpy

from slowlink.share.alloc import Placement, SharedGpus, WholeNodes
from slowlink.share.jobs import KINDS, Job
from slowlink.share.result import Deadlock, Holding, KindStats, PolicyResult, ShareResult
from slowlink.share.scenario import Shape, timeslice_settings
from slowlink.spec.share import Policy, Share


class _Run:
    """The mutable state of one job inside the simulation."""

    __slots__ = ("finish_s", "held", "job", "nodes", "order", "placement", "rate", "remaining_s", "since",
                 "start_s", "version")

    def __init__(self, job: Job, order: int) -> None:
        self.job, self.order = job, order
        self.start_s = self.finish_s = math.nan
        self.remaining_s, self.rate, self.since, self.version, self.held = job.duration_s, 1.0, 0.0, 0, 0
        self.placement: Placement | None = None
        self.nodes: tuple[int, ...] = ()  # nodes whose NICs it uses (multi-node jobs that communicate)


class ShareSim:
    """One policy over one job list; :meth:`run` returns its :class:`PolicyResult`."""

    def __init__(self, shape: Shape, policy: Policy, jobs: list[Job], replicas: int = 4,
                 efficiency: float = 1.0, reserve: bool = False, timeline: bool = False) -> None:
        self.shape, self.policy, self.efficiency, self.reserve = shape, policy, efficiency, reserve
        self.env = simpy.Environment()
        self.stop = self.env.event()
        self.runs = [_Run(j, i) for i, j in enumerate(jobs)]
        self.waiting: dict[int, _Run] = {}
        self.running: dict[str, _Run] = {}
        self.done = 0
        self.total = float(shape.gpus)
        self.free = shape.gpus  # per-gpu scheduler: GPUs no pod holds
        self.alloc: WholeNodes | SharedGpus
        if policy.slicing == "whole":
            self.alloc = WholeNodes(shape.nodes, shape.gpus_per_node, policy.exclusive_nodes)
        else:
            self.alloc = SharedGpus(shape.nodes, shape.gpus_per_node, policy.slicing, shape.gpu,
                                    shape.hbm_bytes, replicas, reserve)
        self.nic_users: dict[int, set[str]] = {}  # node -> multi-node jobs using its NICs
        self.busy = 0.0  # GPUs' worth of compute doing work now
        self.held = 0  # GPUs held by jobs still waiting for the rest
        self.t0 = jobs[0].arrival_s if jobs else 0.0
        self.last = self.t0
        self.area = {"allocated": 0.0, "busy": 0.0, "frag": 0.0, "held": 0.0}
        self.deadlocks: list[Deadlock] = []
        # allocated share of the GPUs once the last job arrived and was scheduled (NaN: a deadlock came first)
        self.at_last_arrival = math.nan
        # (from time, allocated GPUs, busy GPUs, waiting jobs) of every interval, when asked for (plots)
        self.timeline: list[tuple[float, float, float, int]] | None = [] if timeline else None

    # --- time accounting ------------------------------------------------------------------------------------
    def _allocated(self) -> float:
        return self.total - self.free if self.policy.scheduler == "per-gpu" else self.alloc.allocated

    def _account(self) -> None:
        now = self.env.now
        dt = now - self.last
        if dt > 0:
            alloc = self._allocated()
            self.area["allocated"] += alloc * dt
            self.area["busy"] += self.busy * dt
            self.area["held"] += self.held * dt
            if self.waiting:
                self.area["frag"] += (self.total - alloc) * dt
            if self.timeline is not None:
                self.timeline.append((self.last, alloc, self.busy, len(self.waiting)))
        self.last = now

    # --- rates ----------------------------------------------------------------------------------------------
    def _rate(self, r: _Run) -> float:
        """Compute at the slicing's rate ``s``, inter-node communication (``c`` of the run alone) at 1/k of the
        NICs when k multi-node jobs share a node's NICs (fair share; NCCL drives every NIC of a node):
        ``rate = 1 / ((1 - c) / s + c k)``, k the most crowded of the job's nodes."""
        s = self._slice_rate(r)
        c = r.job.comm_fraction
        k = max((len(self.nic_users[n]) for n in r.nodes), default=1)
        return s if c == 0 or k <= 1 else 1.0 / ((1.0 - c) / s + c * k)

    def _slice_rate(self, r: _Run) -> float:
        p = r.placement
        if p is None or self.policy.slicing == "whole":
            return 1.0
        if p.profile is not None:
            return min(1.0, p.profile.compute_fraction / r.job.compute_fraction)
        if self.policy.slicing == "mig" or self.reserve:
            return 1.0  # whole GPUs with MIG off, or a reserved share of a GPU
        assert isinstance(self.alloc, SharedGpus)
        rate = 1.0
        for i in p.gpus:
            if len(self.alloc.gpus[i].residents) > 1:
                share = self.alloc.shares(i)[r.job.id]
                rate = min(rate, self.efficiency * share / r.job.compute_fraction)
        return rate

    def _set_rate(self, r: _Run, rate: float) -> None:
        now = self.env.now
        r.remaining_s -= r.rate * (now - r.since)
        r.since = now
        self.busy += r.job.gpus * r.job.compute_fraction * (rate - r.rate)
        r.rate = rate
        r.version += 1
        self._schedule_finish(r)

    def _neighbours_changed(self, r: _Run) -> None:
        """Re-rate the jobs that share a GPU (time slicing) or a node's NICs with ``r``."""
        near = {k for n in r.nodes for k in self.nic_users[n]}
        if self.policy.slicing == "timeslice" and r.placement is not None:
            assert isinstance(self.alloc, SharedGpus)
            near |= {k for i in r.placement.gpus for k in self.alloc.gpus[i].residents}
        near.discard(r.job.id)
        for key in near:
            other = self.running[key]
            new = self._rate(other)
            if abs(new - other.rate) > 1e-12:
                self._set_rate(other, new)

    def _nodes(self, r: _Run) -> tuple[int, ...]:
        """The nodes whose NICs a multi-node job with communication uses; () for every other job."""
        p = r.placement
        if p is None or r.job.comm_fraction == 0:
            return ()
        nodes = {n for n, _ in p.nodes} | {i // self.shape.gpus_per_node for i in p.gpus}
        return tuple(sorted(nodes)) if len(nodes) > 1 else ()

    # --- job life -------------------------------------------------------------------------------------------
    def _schedule_finish(self, r: _Run) -> None:
        version = r.version
        ev = self.env.timeout(max(r.remaining_s / r.rate, 0.0))
        ev.callbacks.append(lambda _e: self._finish(r, version))

    def _start(self, r: _Run, p: Placement | None) -> None:
        r.start_s = r.since = self.env.now
        r.placement = p
        self.running[r.job.id] = r
        r.nodes = self._nodes(r)
        for n in r.nodes:
            self.nic_users.setdefault(n, set()).add(r.job.id)
        r.rate = self._rate(r)
        self.busy += r.job.gpus * r.job.compute_fraction * r.rate
        self._schedule_finish(r)
        self._neighbours_changed(r)

    def _finish(self, r: _Run, version: int) -> None:
        if version != r.version or self.stop.triggered:
            return
        self._account()
        self.busy -= r.job.gpus * r.job.compute_fraction * r.rate
        r.finish_s = self.env.now
        del self.running[r.job.id]
        self.done += 1
        if self.policy.scheduler == "per-gpu":
            self.free += r.job.gpus
        elif r.placement is not None:
            self.alloc.release(r.job, r.placement)
        for n in r.nodes:
            self.nic_users[n].discard(r.job.id)
        self._neighbours_changed(r)
        self._schedule()
        if self.done == len(self.runs):
            self.stop.succeed()

    def _arrivals(self) -> Generator[simpy.Event, object, None]:
        """The SimPy process that submits the jobs at their arrival times."""
        runs = self.runs
        for k, r in enumerate(runs):
            delay = r.job.arrival_s - self.env.now
            if delay > 0:
                yield self.env.timeout(delay)
            if self.stop.triggered:
                return
            self._account()
            self.waiting[r.order] = r
            if k + 1 < len(runs) and runs[k + 1].job.arrival_s <= self.env.now:
                continue  # submitted at the same moment: one scheduling pass for all of them
            self._schedule()
        self.at_last_arrival = self._allocated() / self.total

    # --- scheduling -----------------------------------------------------------------------------------------
    def _schedule(self) -> None:
        if self.policy.scheduler == "per-gpu":
            self._pass_per_gpu()
            self._check_deadlock()
        else:
            self._pass_gang()

    def _pass_gang(self) -> None:
        # Within one pass GPUs are only taken, never freed: a job that did not fit fails again for every job
        # of the same request, and on whole GPUs for every larger request too.
        monotonic = isinstance(self.alloc, WholeNodes)
        smallest_fail = math.inf
        failed: set[tuple[int, float, float, str | None]] = set()
        for key, r in list(islice(self.waiting.items(), self.policy.window)):
            j = r.job
            request = (j.gpus, j.memory_bytes, j.compute_fraction, j.mig_profile)
            if (monotonic and j.gpus >= smallest_fail) or request in failed:
                continue
            p = self.alloc.try_place(j)
            if p is None:
                if not self.policy.backfill:
                    break
                smallest_fail = min(smallest_fail, j.gpus)
                failed.add(request)
                continue
            del self.waiting[key]
            self._start(r, p)

    def _pass_per_gpu(self) -> None:
        pending = list(islice(self.waiting.values(), self.policy.window))
        while self.free > 0 and pending:
            r = min(pending, key=lambda x: (x.job.arrival_s, x.held, x.order))
            r.held += 1
            self.free -= 1
            self.held += 1
            if r.held == r.job.gpus:
                pending.remove(r)
                self.held -= r.held
                del self.waiting[r.order]
                self._start(r, None)

    def _check_deadlock(self) -> None:
        """Nothing runs, no GPU is free, and waiting jobs hold GPUs: no event can ever free one."""
        if self.running or self.free > 0 or self.held == 0 or self.stop.triggered:
            return
        holders = sorted((r for r in self.waiting.values() if r.held > 0), key=lambda r: r.order)
        self.deadlocks.append(Deadlock(self.env.now, tuple(Holding(r.job.id, r.held, r.job.gpus) for r in holders)))
        self.stop.succeed()

    # --- the run --------------------------------------------------------------------------------------------
    def run(self) -> PolicyResult:
        """Simulate until every job finished or a deadlock stopped the cluster."""
        self.env.process(self._arrivals())
        if self.runs:
            self.env.run(until=self.stop)
        self._account()
        return self._result()

    def _result(self) -> PolicyResult:
        span = max(self.last - self.t0, 1e-12)
        norm = span * self.total
        started = [r for r in self.runs if not math.isnan(r.start_s)]
        done = [r for r in self.runs if not math.isnan(r.finish_s)]
        queue = np.array([r.start_s - r.job.arrival_s for r in started]) if started else np.array([math.nan])
        jct = np.array([r.finish_s - r.job.arrival_s for r in done]) if done else np.array([math.nan])
        p = self.policy
        q50, q95, q99 = (float(np.percentile(queue, q)) for q in (50, 95, 99))
        return PolicyResult(
            p.label, p.scheduler, p.slicing, len(self.runs), len(done), span,
            self.area["busy"] / norm, self.area["allocated"] / norm, self.area["frag"] / norm,
            self.area["held"] / norm, float(queue.mean()), q50, q95, q99,
            float(np.percentile(jct, 95)), self._by_kind(), tuple(self.deadlocks), self.at_last_arrival,
            tuple((t, a / self.total, b / self.total, w) for t, a, b, w in self.timeline or ()))

    def _by_kind(self) -> tuple[KindStats, ...]:
        out = []
        for kind in KINDS:
            runs = [r for r in self.runs if r.job.kind == kind]
            if not runs:
                continue
            done = [r for r in runs if not math.isnan(r.finish_s)]
            nan = math.nan
            q = [r.start_s - r.job.arrival_s for r in done]
            out.append(KindStats(
                kind, len(runs), len(done), float(np.mean(q)) if q else nan,
                float(np.percentile([r.finish_s - r.job.arrival_s for r in done], 95)) if done else nan,
                float(np.mean([(r.finish_s - r.start_s) / r.job.duration_s for r in done])) if done else nan,
                float(np.mean([(r.finish_s - r.job.arrival_s) / r.job.duration_s for r in done])) if done else nan))
        return tuple(out)


def simulate_policy(shape: Shape, policy: Policy, jobs: list[Job], replicas: int = 4,
                    efficiency: float = 1.0, reserve: bool = False, timeline: bool = False) -> PolicyResult:
    """One policy over ``jobs`` on a cluster of ``shape`` (``timeline``: keep the state over time)."""
    return ShareSim(shape, policy, jobs, replicas, efficiency, reserve, timeline).run()


def simulate_share(spec: Share, jobs: list[Job], shape: Shape, timeline: bool = False) -> ShareResult:
    """Every policy of the scenario over the same jobs."""
    replicas, efficiency, reserve = timeslice_settings(spec.timeslice)
    results = tuple(simulate_policy(shape, p, jobs, replicas, efficiency, reserve, timeline) for p in spec.policies)
    return ShareResult(spec.name, shape.gpus, len(jobs), results)
