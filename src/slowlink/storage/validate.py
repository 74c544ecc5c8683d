"""The storage model against published numbers: Megatron-LM's 1T checkpoint on Selene (size within 10%,
save time within 20%) and MLPerf Storage v1.0's read demand per accelerator (within 20%).

MLPerf Storage: the model's demand at the workload's minimum accelerator utilisation,
``AU x batch x sample_bytes / compute_s`` (:func:`samples_per_s_at_utilisation`), against a passing
closed-division run's measured throughput per simulated accelerator (a passing run lies between AU and 1x).
The restore row is shown but not scored: its bound, the file system's read rate, is the paper's own figure.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

from slowlink import units
from slowlink.spec.cluster import cluster_from_mapping
from slowlink.storage.checkpoint import checkpoint_cost
from slowlink.storage.read import read_demand_bytes_s, samples_per_s_at_utilisation
from slowlink.workload.spec import workload_from_mapping

SIZE_TOLERANCE = 0.10  # the done-when: size within 10%
TIME_TOLERANCE = 0.20  # time (and rate) within 20%


@dataclass(frozen=True)
class StorageCase:
    id: str
    quantity: str
    predicted: float
    measured: float
    tolerance: float
    source: str
    scored: bool = True

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1.0

    @property
    def ok(self) -> bool:
        return abs(self.error) <= self.tolerance


def published() -> dict[str, Any]:
    text = resources.files("slowlink.storage.data").joinpath("published_storage.yaml").read_text("utf-8")
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def megatron_cases(case: dict[str, Any]) -> list[StorageCase]:
    """Size, save time and the restore rate of the 1T checkpoint on Selene."""
    cluster = cluster_from_mapping(case["cluster"], "megatron_1t.cluster")
    w = workload_from_mapping(case["workload"], "megatron_1t.workload")
    ck = checkpoint_cost(w, cluster, step_time_s=1.0)
    src = case["source"]
    measured_s = case["checkpoint_bytes"] / (case["save_gbyte_s"] * units.GB)
    restore_rate = ck.restore_bytes / ck.restore_s / units.GB
    return [StorageCase("megatron-1t", "checkpoint size (TB)", ck.size.total_bytes / units.TB,
                        case["checkpoint_bytes"] / units.TB, SIZE_TOLERANCE, src),
            StorageCase("megatron-1t", "save time (s)", ck.write_s, measured_s, TIME_TOLERANCE, src),
            StorageCase("megatron-1t", "restore read rate (GB/s)", restore_rate, case["load_peak_gbyte_s"],
                        TIME_TOLERANCE, src, scored=False)]


def mlperf_cases(data: dict[str, Any]) -> list[StorageCase]:
    """Read demand per accelerator at the minimum AU vs a passing run's throughput per accelerator."""
    out = []
    for c in data["cases"]:
        rate = samples_per_s_at_utilisation(c["batch"], c["compute_s_per_batch"], c["min_au"])
        demand = read_demand_bytes_s(rate, c["sample_bytes"])
        measured = c["samples_s"] / c["accelerators"] * c["sample_bytes"]
        out.append(StorageCase(f"mlperf-{c['id']}", "read per accelerator (GB/s)", demand / units.GB,
                               measured / units.GB, TIME_TOLERANCE, data["results_source"]))
    return out


def cases() -> list[StorageCase]:
    """Every published storage case, Megatron first."""
    data = published()
    return megatron_cases(data["megatron_1t"]) + mlperf_cases(data["mlperf_storage_v1"])
