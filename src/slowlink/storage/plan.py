"""The storage model joined for ``slowlink plan``: data stall and checkpoint overhead per step, beside the
step model's communication, and the sentence that names storage when it is the largest wait.

Whatever needs the cluster's ``storage:`` section is None without one; the checkpoint size never does.
The ``to_json`` keys ``read_demand_gbyte_s, data_stall_s, checkpoint_bytes, checkpoint_write_s,
checkpoint_blocking_s, checkpoint_restore_s, checkpoints_that_fit`` are a contract (added, never renamed).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from slowlink import units
from slowlink.spec.cluster import Cluster
from slowlink.spec.workload import Workload
from slowlink.storage.capacity import Capacity, capacity
from slowlink.storage.checkpoint import CheckpointCost, CheckpointSize, checkpoint_cost, checkpoint_size, interval_s
from slowlink.storage.paths import details_of
from slowlink.storage.read import DataFeed, data_feed
from slowlink.workload.step import WAIT_SHARE

if TYPE_CHECKING:
    from slowlink.workload.step import StepResult

@dataclass(frozen=True)
class StoragePlan:
    step_time_s: float
    largest_comm_s: float
    feed: DataFeed
    size: CheckpointSize
    checkpoint: CheckpointCost | None
    capacity: Capacity | None

    def at_interval(self, interval_s: float) -> StoragePlan:
        """The same plan with a checkpoint every ``interval_s``: the interval the failure model settles on
        (:func:`slowlink.reliability.goodput.interval_choice`), so that the amortised overhead and the capacity's
        time until full are priced at the interval the run uses."""
        ck = None if self.checkpoint is None else replace(self.checkpoint, interval_s=interval_s)
        cap = None if self.capacity is None else self.capacity.at_interval(interval_s)
        return replace(self, checkpoint=ck, capacity=cap)

    @property
    def data_stall_s(self) -> float | None:
        return self.feed.stall_s if self.feed.supply_s else None

    @property
    def run_step_s(self) -> float:
        """Seconds of a step as it runs: the step model's and the data stall (what a checkpoint interval counts)."""
        return self.step_time_s + (self.data_stall_s or 0.0)

    @property
    def checkpoint_overhead_s(self) -> float | None:
        return None if self.checkpoint is None else self.checkpoint.overhead_per_step_s(self.run_step_s)

    @property
    def wait_s(self) -> float:
        return (self.data_stall_s or 0.0) + (self.checkpoint_overhead_s or 0.0)

    @property
    def dominates(self) -> bool:
        """Storage waits more per step than any communication dimension, and above the step model's
        :data:`~slowlink.workload.step.WAIT_SHARE` of the step."""
        return bool(self.wait_s > max(self.largest_comm_s, WAIT_SHARE * self.run_step_s))

    def sentence(self) -> str:
        """The storage wait in words: data stall and checkpoint overhead, each with what binds it."""
        parts = []
        if self.data_stall_s:
            parts.append(f"data stall {self.data_stall_s:.3g} s/step ({self.feed.binding} cannot keep up with "
                         f"{self.feed.demand_bytes_s / units.GB:.3g} GB/s)")
        ck, over = self.checkpoint, self.checkpoint_overhead_s
        if ck is not None and over:
            what = "write" if ck.mode == "sync" else "device-to-host copy"
            parts.append(f"{ck.mode} checkpoint {over:.3g} s/step amortised ({what} of "
                         f"{ck.size.total_bytes / units.GB:,.0f} GB, {ck.write_s:.3g} s to write, bound by the "
                         f"{ck.binding})")
        share = self.wait_s / self.run_step_s
        return f"storage: {'; '.join(parts) or 'no wait'}: {share:.0%} of the step"

    def to_json(self) -> dict[str, object]:
        ck = self.checkpoint
        return {
            "read_demand_gbyte_s": self.feed.demand_bytes_s / units.GB,
            "data_stall_s": self.data_stall_s,
            "checkpoint_bytes": self.size.total_bytes,
            "checkpoint_write_s": None if ck is None else ck.write_s,
            "checkpoint_blocking_s": None if ck is None else ck.blocking_s,
            "checkpoint_restore_s": None if ck is None else ck.restore_s,
            "checkpoints_that_fit": None if self.capacity is None else self.capacity.fit,
            "checkpoint_overhead_s": self.checkpoint_overhead_s,
            "dominates": self.dominates, "bottleneck": self.sentence() if self.dominates else "",
            "data": self.feed.to_json(), "checkpoint": None if ck is None else ck.to_json(),
            "capacity": None if self.capacity is None else self.capacity.to_json(),
        }


def dataset_bytes(w: Workload, feed: DataFeed) -> float:
    """Bytes the dataset occupies: ``data.samples x bytes per sample`` (0 when the sample count is not given)."""
    return 0.0 if w.data is None or w.data.samples is None else w.data.samples * feed.bytes_per_sample


def plan_storage(w: Workload, cluster: Cluster, step: StepResult) -> StoragePlan:
    """Data feed, checkpoint cost and capacity of ``w`` on ``cluster`` at the step model's step time; the
    workload's checkpoint interval counts steps as they run, data stall included."""
    t = step.step_time_s
    feed = data_feed(w, cluster, t)
    run_t = t + (feed.stall_s if feed.supply_s else 0.0)  # StoragePlan.run_step_s
    size = checkpoint_size(w)
    ck = cap = None
    if cluster.storage is not None:
        ck = checkpoint_cost(w, cluster, run_t)
        cap = capacity(details_of(cluster.storage), size.total_bytes, dataset_bytes(w, feed),
                       interval_s(w.checkpoint, run_t))
    return StoragePlan(t, max(step.comm_s.values(), default=0.0), feed, size, ck, cap)
