"""The reliability side of the specs: the cluster's optional ``reliability:`` section (failure rates and
recovery times that override the defaults of ``reliability/data/failures.yaml``). YAML key names are a
contract: added, never renamed (docs/goodput.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field, field_validator

from slowlink.fileio import SPEC_CONFIG


class ReliabilitySpec(BaseModel):
    """Failure rates and recovery times of a cluster; every key is optional, the defaults are Llama 3's mix
    and the recovery times of ``reliability/data/failures.yaml`` (each with its source)."""

    model_config = SPEC_CONFIG
    failures_per_1000_node_days: float | None = Field(
        None, gt=0, description="Unexpected job interruptions per 1000 node-days; replaces the default mix's "
        "total (Llama 3: 419 in 54 days on 2,048 nodes = 3.79), keeping its shares for the breakdown.")
    planned_per_1000_node_days: float | None = Field(
        None, ge=0, description="Planned interruptions (maintenance) per 1000 node-days; default Llama 3's 47 "
        "in 54 days on 2,048 nodes (0.42). Each costs a restart and a restore, no lost work.")
    restart_overhead_s: float | None = Field(
        None, ge=0, description="Seconds from a detected failure to training processes ready to restore; "
        "replaces the restart model (default: reschedule + process start + NCCL init + all-to-one connections, "
        "growing with the job's ranks; reliability/restart.py).")
    reschedule_s: float | None = Field(
        None, ge=0, description="Seconds the scheduler takes to put the gang back on healthy nodes, added to the "
        "restart model (default 0: not modelled, no published figure).")
    crash_detect_s: float | None = Field(
        None, ge=0, description="Seconds to notice a crashed rank (default 0.1, torchrun's monitor interval).")
    transport_detect_s: float | None = Field(
        None, ge=0, description="Seconds until the peers of a lost host or link fail (default 34.4, NCCL's RDMA "
        "queue-pair timeout and retries).")
    hang_timeout_s: float | None = Field(
        None, ge=0, description="Seconds a hang waits for the collective timeout (default 600, PyTorch NCCL).")
    checkpoint_interval_s: float | None = Field(
        None, description="Not here: the checkpoint interval is the job's, the workload's checkpoint: "
        "interval_minutes or interval_steps (default: the Daly (2006) optimum); refused with that message.")
    checkpoint_s: float | None = Field(
        None, ge=0, description="Override: seconds training stops for one checkpoint (default: the storage "
        "model's write time, or the async blocking part).")
    restore_s: float | None = Field(
        None, ge=0, description="Override: seconds to restore the checkpoint on restart (default: the storage "
        "model's restore storm).")
    seed: int = Field(0, description="Seed of the Monte Carlo ETTR.")

    @field_validator("checkpoint_interval_s")
    @classmethod
    def _interval_is_the_jobs(cls, v: float | None) -> float | None:
        if v is not None:
            raise ValueError(f"the checkpoint interval is the job's, set once, in the workload: checkpoint: "
                             f"{{interval_minutes: {v / 60:g}}} (or interval_steps), not in the cluster file")
        return v


@dataclass(frozen=True)
class Reliability:
    """A cluster's ``reliability:`` section, resolved (every field as :class:`ReliabilitySpec` documents it; None:
    the failure model's default); :meth:`of` gives the schema's defaults."""

    failures_per_1000_node_days: float | None
    planned_per_1000_node_days: float | None
    restart_overhead_s: float | None
    reschedule_s: float | None
    crash_detect_s: float | None
    transport_detect_s: float | None
    hang_timeout_s: float | None
    checkpoint_s: float | None
    restore_s: float | None
    seed: int

    @classmethod
    def of(cls, spec: ReliabilitySpec | None = None, **given: Any) -> Reliability:
        """``spec`` resolved, or a section written in code (``given``) validated as a file's ``reliability:``."""
        d = (spec if spec is not None else ReliabilitySpec(**given)).model_dump(exclude={"checkpoint_interval_s"})
        return cls(**d)
