"""What one interruption costs: detection, restart, checkpoint restore and the async commit lag, and what one
checkpoint stops training for. Restore and checkpoint times come from the storage model
(:func:`slowlink.storage.checkpoint.checkpoint_cost`: the restore storm, the write or the async staging),
unless the cluster's ``reliability:`` section overrides them.

  detect     mean over the failure mix: crash -> crash_detect_s, transport -> transport_detect_s,
             hang -> hang_timeout_s (slowlink.reliability.failures)
  restart    reschedule + process start + communicator init, growing with the ranks
             (slowlink.reliability.restart; reliability.restart_overhead_s replaces it)
  restore    every rank reads its shard at once (storage model)
  commit lag async only: a failure while the last checkpoint drains loses it, so the work since the one
             before is at stake for the drain's length (added per failure, a first-order charge)
  checkpoint sync: the write; async: the device-to-host copy, plus whatever of the drain outlasts the interval
"""

from __future__ import annotations

from dataclasses import dataclass

from slowlink.errors import SpecError
from slowlink.spec.cluster import Cluster
from slowlink.spec.reliability import Reliability
from slowlink.spec.workload import Workload
from slowlink.storage.checkpoint import CheckpointCost


@dataclass(frozen=True)
class CheckpointTimes:
    """Seconds one checkpoint stops training, its async drain, and the restore; where they came from."""

    blocking_s: float
    drain_s: float
    restore_s: float
    mode: str
    source: str  # "storage model" or "reliability overrides"

    def stop_s(self, interval_s: float) -> float:
        """Training stopped per checkpoint: the blocking part, plus a drain that outlasts the interval."""
        return self.blocking_s + (max(0.0, self.drain_s - interval_s) if self.mode == "async" else 0.0)

    @property
    def commit_lag_s(self) -> float:
        return self.drain_s if self.mode == "async" else 0.0


@dataclass(frozen=True)
class RecoveryCost:
    """Seconds of one unexpected interruption, by phase (module docstring)."""

    detect_s: float
    restart_s: float
    restore_s: float
    commit_lag_s: float

    @property
    def total_s(self) -> float:
        return self.detect_s + self.restart_s + self.restore_s + self.commit_lag_s

    def to_json(self) -> dict[str, float]:
        return {"detect_s": self.detect_s, "restart_s": self.restart_s, "restore_s": self.restore_s,
                "commit_lag_s": self.commit_lag_s, "total_s": self.total_s}


def checkpoint_times(w: Workload, cluster: Cluster, ck: CheckpointCost | None) -> CheckpointTimes:
    """Checkpoint and restore seconds: the reliability overrides when both are set, else the storage model's
    checkpoint cost ``ck`` (the storage plan's, None without the cluster's ``storage:`` section; the overrides
    fill in what they give)."""
    rel: Reliability | None = cluster.reliability
    if rel is not None and rel.checkpoint_s is not None and rel.restore_s is not None:
        mode = w.checkpoint.mode if w.checkpoint else "sync"
        return CheckpointTimes(rel.checkpoint_s, 0.0, rel.restore_s, "sync" if mode == "sync" else "async",
                               "reliability overrides")
    if ck is None:
        raise SpecError(f"cluster {cluster.name}: storage (None): the checkpoint and restore times come from the "
                        "storage model: add a storage: section, or set reliability.checkpoint_s and "
                        "reliability.restore_s", rule="storage_given")
    blocking = ck.blocking_s if rel is None or rel.checkpoint_s is None else rel.checkpoint_s
    restore = ck.restore_s if rel is None or rel.restore_s is None else rel.restore_s
    return CheckpointTimes(blocking, ck.drain_s, restore, ck.mode, "storage model")
