"""The reliability model against published figures (``data/published.yaml``): MTTF against job size and
ETTR of a published run, each with its source; second-hand figures are marked as such.

MTTF cases run the default failure mix (or the case's own rate) at the case's job size; a case that counts
only GPU failures is compared with the mix's GPU parts. The ETTR case plans the published run with the step
and storage models and the default recovery times, at the Daly interval; its published figure is a lower
bound, so the error is signed against the bound.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from importlib import resources
from typing import Any

import yaml

from slowlink.reliability.failures import failure_model
from slowlink.spec.reliability import ReliabilitySpec


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


def mttf_case(c: dict[str, Any]) -> ReliabilityCase:
    """MTTF (h) of the case's job size under the default mix, its own rate, or only the mix's GPU parts."""
    rate = c.get("failures_per_1000_node_days")
    fm = failure_model(ReliabilitySpec(failures_per_1000_node_days=rate) if rate else None, c["gpus_per_node"])
    what = "MTTF (h)"
    if c.get("category"):
        fm = replace(fm, components=tuple(x for x in fm.components if x.category == c["category"]))
        what = f"MTTF of {c['category']} failures (h)"
    return ReliabilityCase(c["id"], f"{what} at {c['gpus']:,} GPUs", fm.mttf_h(c["gpus"], c["gpus_per_node"]),
                           c["published_h"], c["source"], c.get("scored", True), c.get("second_hand", False))


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
    return ReliabilityCase(c["id"], f"ETTR at {g.gpus:,} GPUs{bound}", g.ettr, c["published"], c["source"],
                           c.get("scored", True), c.get("second_hand", False))


def cases() -> list[ReliabilityCase]:
    """Every published reliability case: MTTF against job size first, then ETTR."""
    data = published()
    return [mttf_case(c) for c in data["mttf"]] + [ettr_case(c) for c in data["ettr"]]
