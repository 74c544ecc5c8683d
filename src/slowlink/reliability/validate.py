"""The reliability model against published figures (``data/published.yaml``): MTTF against job size, the work
a failure loses against the checkpoint interval, and ETTR of a published run, each with its source.

Like for like: a case from another fleet runs the model with that fleet's own failure rate (``fleet_rate``,
from the same source), so the score is the model's form, not the default (Llama 3) rates carried to another
fleet. MTTF cases: ``1 / (nodes x rate)``. Lost-work cases: the exact closed form's work lost per failure at
the published checkpoint interval (:func:`~slowlink.reliability.ettr.segment_times`). The ETTR case plans the
published run with the step and storage models and the default recovery times, at the Daly interval; its
published figure is a lower bound, so the error is signed against the bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

from slowlink.reliability.ettr import EttrInputs, segment_times
from slowlink.reliability.failures import FailureModel, failure_model, rate_per_1000_node_days
from slowlink.spec.reliability import ReliabilitySpec
from slowlink.units import HOUR


@dataclass(frozen=True)
class ReliabilityCase:
    id: str
    quantity: str
    predicted: float
    published: float
    source: str
    scored: bool = True
    second_hand: bool = False

    @property
    def error(self) -> float:
        return self.predicted / self.published - 1.0

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "quantity": self.quantity, "predicted": self.predicted,
                "published": self.published, "error": self.error, "scored": self.scored,
                "second_hand": self.second_hand, "source": self.source}


def published() -> dict[str, Any]:
    text = resources.files("slowlink.reliability.data").joinpath("published.yaml").read_text("utf-8")
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def case_model(c: dict[str, Any]) -> tuple[FailureModel, str]:
    """The failure model of a case: its fleet's own rate when the source gives one, else the default mix."""
    fleet = c.get("fleet_rate")
    if fleet is None:
        return failure_model(None, c["gpus_per_node"]), "the default mix"
    nodes = fleet["nodes"] if "nodes" in fleet else fleet["gpus"] / c["gpus_per_node"]
    rate = rate_per_1000_node_days(fleet["failures"], fleet["days"], nodes)
    return (failure_model(ReliabilitySpec(failures_per_1000_node_days=rate), c["gpus_per_node"]),
            f"its fleet's {rate:.3g} / 1000 node-days")


def _case(c: dict[str, Any], quantity: str, predicted: float, published_value: float) -> ReliabilityCase:
    return ReliabilityCase(c["id"], quantity, predicted, published_value, c["source"], c.get("scored", True),
                           c.get("second_hand", False))


def mttf_case(c: dict[str, Any]) -> ReliabilityCase:
    """MTTF (h) at the case's job size under its fleet's rate (or the default mix)."""
    fm, rate = case_model(c)
    return _case(c, f"MTTF (h) at {c['gpus']:,} GPUs, {rate}", fm.mttf_h(c["gpus"], c["gpus_per_node"]),
                 c["published_h"])


def lost_work_case(c: dict[str, Any]) -> ReliabilityCase:
    """Work lost per failure (h) at the published checkpoint interval: lost work / failures of one segment."""
    fm, rate = case_model(c)
    lam = 1.0 / (fm.mttf_h(c["gpus"], c["gpus_per_node"]) * HOUR)
    seg = segment_times(EttrInputs(float(c["interval_s"]), float(c["checkpoint_s"]), lam, 0.0))
    interval_h = c["interval_s"] / HOUR
    return _case(c, f"work lost per failure (h), checkpoint every {interval_h:.3g} h, {c['gpus']:,} GPUs, {rate}",
                 seg.lost_work_s / seg.failures / HOUR, c["published_h"])


def ettr_case(c: dict[str, Any]) -> ReliabilityCase:
    """ETTR of a published run at the Daly interval (step, storage and failure models, default recovery)."""
    from slowlink.reliability.goodput import goodput
    from slowlink.spec.cluster import cluster_from_mapping
    from slowlink.workload.spec import workload_from_mapping
    from slowlink.workload.step import plan

    cluster = cluster_from_mapping(c["cluster"], f"{c['id']}.cluster")
    w = workload_from_mapping(c["workload"], f"{c['id']}.workload")
    g = goodput(w, cluster, plan(w, cluster, check_memory=False))  # the run fit; see workload/validate.py
    bound = " (published: a lower bound)" if c.get("bound") == "lower" else ""
    return _case(c, f"ETTR at {g.gpus:,} GPUs{bound}", g.ettr, c["published"])


def cases() -> list[ReliabilityCase]:
    """Every published reliability case: MTTF against job size, lost work against interval, then ETTR."""
    data = published()
    return ([mttf_case(c) for c in data["mttf"]] + [lost_work_case(c) for c in data.get("lost_work", [])]
            + [ettr_case(c) for c in data["ettr"]])
