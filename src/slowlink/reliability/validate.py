"""The reliability model against published figures (``data/published.yaml``): MTTF against job size, the work
a failure loses against the checkpoint interval, ETTR of a published run, and the checkpoint interval that
maximises ETTR, each with its source.

Like for like: a case from another fleet runs the model with that fleet's own failure rate (``fleet_rate``,
from the same source), so the score is the model's form, not the default (Llama 3) rates carried to another
fleet. MTTF cases: ``1 / (nodes x rate)``. Lost-work cases: the exact closed form's work lost per failure at
the published checkpoint interval (:func:`~slowlink.reliability.ettr.segment_times`). The ETTR case plans the
published run with the step and storage models and the default recovery times, at the Daly interval; its
published figure is a lower bound, so the error is signed against the bound. Interval cases: the exact closed
form's optimum (:func:`~slowlink.reliability.ettr.best_interval_s`) at the published MTTF, checkpoint and
recovery times. Every case carries its ``kind`` so the error is also summarised kind by kind (:func:`summary`):
the interval cases check the ETTR model against a published model's optimum, not a fleet.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

from slowlink.fileio import parse_text
from slowlink.reliability.ettr import EttrInputs, best_interval_s, daly_interval_s, segment_times
from slowlink.reliability.failures import FailureModel, failure_model, rate_per_1000_node_days
from slowlink.spec.reliability import Reliability
from slowlink.units import HOUR, MINUTE


@dataclass(frozen=True)
class ReliabilityCase:
    id: str
    quantity: str
    predicted: float
    published: float
    source: str
    kind: str  # the section of published.yaml: mttf, lost_work, ettr or interval
    scored: bool = True
    second_hand: bool = False

    @property
    def error(self) -> float:
        return self.predicted / self.published - 1.0

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "kind": self.kind, "quantity": self.quantity, "predicted": self.predicted,
                "published": self.published, "error": self.error, "scored": self.scored,
                "second_hand": self.second_hand, "source": self.source}


def published() -> dict[str, Any]:
    text = resources.files("slowlink.reliability.data").joinpath("published.yaml").read_text("utf-8")
    data: dict[str, Any] = parse_text(text, "published.yaml", False)
    return data


def case_model(c: dict[str, Any]) -> tuple[FailureModel, str]:
    """The failure model of a case: its fleet's own rate when the source gives one, else the default mix."""
    fleet = c.get("fleet_rate")
    if fleet is None:
        return failure_model(None, c["gpus_per_node"]), "the default mix"
    nodes = fleet["nodes"] if "nodes" in fleet else fleet["gpus"] / c["gpus_per_node"]
    rate = rate_per_1000_node_days(fleet["failures"], fleet["days"], nodes)
    return (failure_model(Reliability.of(failures_per_1000_node_days=rate), c["gpus_per_node"]),
            f"its fleet's {rate:.3g} / 1000 node-days")


def _case(c: dict[str, Any], kind: str, quantity: str, predicted: float, published_value: float
          ) -> ReliabilityCase:
    return ReliabilityCase(c["id"], quantity, predicted, published_value, c["source"], kind, c.get("scored", True),
                           c.get("second_hand", False))


def mttf_case(c: dict[str, Any]) -> ReliabilityCase:
    """MTTF (h) at the case's job size under its fleet's rate (or the default mix)."""
    fm, rate = case_model(c)
    return _case(c, "mttf", f"MTTF (h) at {c['gpus']:,} GPUs, {rate}", fm.mttf_h(c["gpus"], c["gpus_per_node"]),
                 c["published_h"])


def lost_work_case(c: dict[str, Any]) -> ReliabilityCase:
    """Work lost per failure (h) at the published checkpoint interval: lost work / failures of one segment."""
    fm, rate = case_model(c)
    lam = 1.0 / (fm.mttf_h(c["gpus"], c["gpus_per_node"]) * HOUR)
    seg = segment_times(EttrInputs(float(c["interval_s"]), float(c["checkpoint_s"]), lam, 0.0))
    interval_h = c["interval_s"] / HOUR
    return _case(c, "lost_work", f"work lost per failure (h), checkpoint every {interval_h:.3g} h, "
                 f"{c['gpus']:,} GPUs, {rate}", seg.lost_work_s / seg.failures / HOUR, c["published_h"])


def ettr_case(c: dict[str, Any]) -> ReliabilityCase:
    """ETTR of a published run at the Daly interval (step, storage and failure models, default recovery)."""
    from slowlink.reliability.goodput import goodput
    from slowlink.spec.cluster import cluster_from_mapping
    from slowlink.spec.workload import workload_from_mapping
    from slowlink.storage.plan import plan_storage
    from slowlink.workload.step import fit_dp, plan

    cluster = cluster_from_mapping(c["cluster"], f"{c['id']}.cluster")
    w = fit_dp(workload_from_mapping(c["workload"], f"{c['id']}.workload"), cluster)
    step = plan(w, cluster, check_memory=False)  # the run fit; see workload/validate.py
    g = goodput(w, cluster, step, plan_storage(w, cluster, step))
    bound = " (published: a lower bound)" if c.get("bound") == "lower" else ""
    return _case(c, "ettr", f"ETTR at {g.gpus:,} GPUs{bound}", g.ettr, c["published"])


def interval_case(c: dict[str, Any]) -> ReliabilityCase:
    """The checkpoint interval (min) that maximises the exact closed form at the published MTTF, checkpoint and
    recovery times (searched from the Daly estimate, no shorter than 1 s)."""
    mttf_s, ck_s, rec_s = float(c["mttf_s"]), float(c["checkpoint_s"]), float(c["recovery_s"])
    best = best_interval_s(EttrInputs(daly_interval_s(ck_s, mttf_s), ck_s, 1.0 / mttf_s, rec_s), lo_s=1.0)
    return _case(c, "interval", f"best checkpoint interval (min), MTTF {mttf_s / HOUR:.3g} h, checkpoint "
                 f"{ck_s / MINUTE:.3g} min, recovery {rec_s / MINUTE:.3g} min", best / MINUTE,
                 c["published_s"] / MINUTE)


def cases() -> list[ReliabilityCase]:
    """Every published reliability case: MTTF against job size, lost work against interval, ETTR, then the best
    interval."""
    data = published()
    return ([mttf_case(c) for c in data["mttf"]] + [lost_work_case(c) for c in data.get("lost_work", [])]
            + [ettr_case(c) for c in data["ettr"]] + [interval_case(c) for c in data.get("interval", [])])


@dataclass(frozen=True)
class ErrorSummary:
    """Mean and max absolute relative error over scored cases; ``by_kind`` the same kind by kind (empty inside)."""

    mean_abs_error: float
    max_abs_error: float
    scored_cases: int
    by_kind: dict[str, ErrorSummary]

    @classmethod
    def of(cls, scored: list[ReliabilityCase], by_kind: bool = True) -> ErrorSummary:
        errs = [abs(c.error) for c in scored]
        kinds = dict.fromkeys(c.kind for c in scored) if by_kind else {}
        return cls(sum(errs) / len(errs), max(errs), len(errs),
                   {k: cls.of([c for c in scored if c.kind == k], by_kind=False) for k in kinds})

    def to_json(self) -> dict[str, object]:
        """The keys of ``slowlink validate goodput --json`` (a contract)."""
        js: dict[str, object] = {"mean_abs_error": self.mean_abs_error, "max_abs_error": self.max_abs_error,
                                 "scored_cases": self.scored_cases}
        return js | ({"by_kind": {k: v.to_json() for k, v in self.by_kind.items()}} if self.by_kind else {})


def summary(cs: list[ReliabilityCase]) -> ErrorSummary | None:
    """Mean and max absolute error over the scored cases, overall and kind by kind; None when no case is scored
    (an unscored case never moves it)."""
    scored = [c for c in cs if c.scored]
    return ErrorSummary.of(scored) if scored else None
