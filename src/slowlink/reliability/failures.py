"""Failure rates per component and the mean time to failure (MTTF) of a job.

Each component of the default mix (``data/failures.yaml``, Llama 3's 419 unexpected interruptions in 54 days
on 16,384 H100) fails as an independent Poisson process whose rate grows with the job: per GPU for GPU
parts, per node for the rest. A synchronous job stops at the first failure of any part, so its rate is the
sum (the series system of reliability theory; Kokolis et al. 2024 fit the same ``MTTF ~ 1 / N``)::

    lambda_job = sum_c rate_c x n_c      (n_c = the job's GPUs or nodes)      MTTF = 1 / lambda_job
    rate_c     = count_c / (exposure_c x days x 24)                          failures per unit-hour

Each component is detected by its kind: ``crash`` (the rank dies; the launcher's poll), ``transport`` (a host
or link is gone; the peers' RDMA queue pairs time out) or ``hang`` (the process group's collective timeout).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from typing import Any

from slowlink import units
from slowlink.fileio import parse_text
from slowlink.reliability.restart import RestartModel, restart_model, transport_timeout_s
from slowlink.spec.reliability import Reliability

NODE_DAYS_PER_UNIT = 1000.0  # rates in the spec are per 1000 node-days (Kokolis et al. 2024's unit)
HOURS_PER_DAY = units.DAY / units.HOUR


@dataclass(frozen=True)
class Component:
    name: str
    category: str
    rate_per_h: float  # failures per hour of one unit (a GPU or a node)
    scales_with: str  # "gpu" or "node"
    detection: str  # "crash", "transport" or "hang"

    def job_rate_per_h(self, gpus: int, gpus_per_node: int) -> float:
        """Failures per hour this part causes in a job of ``gpus`` GPUs: rate x the job's GPUs or nodes."""
        units_in_job = gpus if self.scales_with == "gpu" else gpus / gpus_per_node
        return self.rate_per_h * units_in_job


@dataclass(frozen=True)
class FailureModel:
    """Every component's rate, the planned-interruption rate per node-hour, and the recovery defaults."""

    components: tuple[Component, ...]
    planned_per_node_h: float
    crash_detect_s: float
    transport_detect_s: float
    hang_timeout_s: float
    restart: RestartModel
    source: str

    def job_rate_per_h(self, gpus: int, gpus_per_node: int) -> float:
        """Unexpected interruptions per hour of a job: the sum over components (module docstring)."""
        return sum(c.job_rate_per_h(gpus, gpus_per_node) for c in self.components)

    def mttf_h(self, gpus: int, gpus_per_node: int) -> float:
        """Mean time to (unexpected) failure of a job, hours: ``1 / lambda_job``."""
        return 1.0 / self.job_rate_per_h(gpus, gpus_per_node)

    def planned_rate_per_h(self, gpus: int, gpus_per_node: int) -> float:
        """Planned interruptions per hour of a job: the per-node rate x its nodes."""
        return self.planned_per_node_h * gpus / gpus_per_node

    def detect_by_kind_s(self) -> dict[str, float]:
        """Seconds to detect a failure of each kind (module docstring)."""
        return {"crash": self.crash_detect_s, "transport": self.transport_detect_s, "hang": self.hang_timeout_s}

    def detect_s(self, gpus: int, gpus_per_node: int) -> float:
        """Mean detection time: each failure's share of the rate x its kind's detection."""
        by_kind = self.detect_by_kind_s()
        rates = [(c.job_rate_per_h(gpus, gpus_per_node), by_kind[c.detection]) for c in self.components]
        return sum(r * t for r, t in rates) / sum(r for r, _ in rates)

    def restart_s(self, gpus: int) -> float:
        """Seconds to restart a job of ``gpus`` ranks (:class:`~slowlink.reliability.restart.RestartModel`)."""
        return self.restart.restart_s(gpus)

    def shares(self, gpus: int, gpus_per_node: int) -> dict[str, float]:
        """Each category's share of the job's failures (GPU, host, network, software, unknown)."""
        total = self.job_rate_per_h(gpus, gpus_per_node)
        out: dict[str, float] = {}
        for c in self.components:
            out[c.category] = out.get(c.category, 0.0) + c.job_rate_per_h(gpus, gpus_per_node) / total
        return out

    def per_1000_node_days(self, gpus_per_node: int = 8) -> float:
        """The mix's total as failures per 1000 node-days (on nodes of ``gpus_per_node``)."""
        return self.job_rate_per_h(gpus_per_node, gpus_per_node) * HOURS_PER_DAY * NODE_DAYS_PER_UNIT


def rate_per_1000_node_days(failures: float, days: float, nodes: float) -> float:
    """A failure count seen over ``days`` on ``nodes`` nodes as failures per 1000 node-days (the spec's unit)."""
    return failures / (days * nodes) * NODE_DAYS_PER_UNIT


@cache
def _data() -> dict[str, Any]:
    text = resources.files("slowlink.reliability.data").joinpath("failures.yaml").read_text("utf-8")
    data: dict[str, Any] = parse_text(text, "failures.yaml", False)
    return data


def default_model() -> FailureModel:
    """The Llama 3 mix of ``data/failures.yaml`` as rates per unit-hour (module docstring)."""
    d = _data()
    exp = d["exposure"]
    hours = exp["days"] * HOURS_PER_DAY
    unit_hours = {"gpu": exp["gpus"] * hours, "node": exp["gpus"] / exp["gpus_per_node"] * hours}
    comps = tuple(Component(c["name"], c["category"], c["count"] / unit_hours[c["scales_with"]],
                            c["scales_with"], c["detection"]) for c in d["components"])
    rec = d["recovery"]
    qp = rec["transport_detect_s"]
    return FailureModel(comps, d["planned"]["count"] / unit_hours["node"], float(rec["crash_detect_s"]["value"]),
                        transport_timeout_s(int(qp["ib_timeout"]), int(qp["ib_retry_cnt"])),
                        float(rec["hang_timeout_s"]["value"]), restart_model(rec["restart"]), d["source"])


def failure_model(spec: Reliability | None, gpus_per_node: int = 8) -> FailureModel:
    """The default mix with a cluster's ``reliability:`` overrides applied.

    ``failures_per_1000_node_days`` rescales every component by one factor, so the total matches it on nodes
    of ``gpus_per_node`` and the mix's shares are kept for the breakdown.
    """
    m = default_model()
    if spec is None:
        return m
    if spec.failures_per_1000_node_days is not None:
        k = spec.failures_per_1000_node_days / m.per_1000_node_days(gpus_per_node)
        m = replace(m, components=tuple(replace(c, rate_per_h=c.rate_per_h * k) for c in m.components))
    if spec.planned_per_1000_node_days is not None:
        m = replace(m, planned_per_node_h=spec.planned_per_1000_node_days / NODE_DAYS_PER_UNIT / HOURS_PER_DAY)
    restart = replace(m.restart, override_s=spec.restart_overhead_s,
                      reschedule_s=m.restart.reschedule_s if spec.reschedule_s is None else spec.reschedule_s)
    return replace(
        m,
        crash_detect_s=m.crash_detect_s if spec.crash_detect_s is None else spec.crash_detect_s,
        transport_detect_s=m.transport_detect_s if spec.transport_detect_s is None else spec.transport_detect_s,
        hang_timeout_s=m.hang_timeout_s if spec.hang_timeout_s is None else spec.hang_timeout_s,
        restart=restart,
    )
