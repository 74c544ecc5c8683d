"""Failures as types: every refusal a search or a command sorts by carries its rule id, set where the rule is
checked, kept when a command rewords the message, and never read from the text."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from slowlink.cost.design import Design, build_design
from slowlink.cost.prices import load_prices
from slowlink.errors import InfeasiblePlan, SlowlinkError, SpecError
from slowlink.fileio import parse_text
from slowlink.spec.cluster import cluster_from_mapping, load_cluster
from slowlink.spec.workload import Workload, load_workload
from slowlink.workload.step import plan

EX = Path(__file__).resolve().parents[1] / "examples"
REF = load_cluster(EX / "ref-64gpu.yaml")  # 64 H100
A100 = cluster_from_mapping(parse_text((EX / "ref-64gpu.yaml").read_text().replace("gpu: h100-sxm", "gpu: a100-80gb"),
                                       "a100", False))


def _w(**changes: dict[str, Any]) -> Workload:
    w = load_workload(EX / "llama3-8b.yaml")
    return replace(w, **{k: getattr(w, k).model_copy(update=v) for k, v in changes.items()})


@pytest.mark.parametrize(("changes", "rule"), [
    ({"parallel": {"dp": 3}}, "parallel_divides"),
    ({"parallel": {"tp": 3, "dp": 1}}, "parallel_divides"),
    ({"parallel": {"tp": 64, "dp": 1}}, "tp_divides_heads"),
    ({"parallel": {"pp": 64, "tp": 1, "dp": 1}}, "pp_divides_layers"),
    ({"training": {"global_batch": 100}}, "batch_divides"),
    ({"training": {"micro_batch": 64, "global_batch": 64 * 32}}, "memory_fits"),
    ({"training": {"precision": "fp8"}}, "precision_supported"),
])
def test_the_step_model_names_the_rule_it_enforces(changes: dict[str, Any], rule: str) -> None:
    cluster = A100 if rule == "precision_supported" else REF  # an A100 has no FP8 tensor cores
    with pytest.raises(InfeasiblePlan) as exc:
        plan(_w(**changes), cluster)
    assert exc.value.rule == rule, str(exc.value)


def test_a_reworded_error_keeps_its_class_and_rule() -> None:
    exc = InfeasiblePlan("memory per GPU (90 GiB) exceeds the GPU's HBM (80 GiB)", rule="memory_fits")
    again = exc.reworded(f"w.yaml on c.yaml (cluster c): {exc}")
    assert type(again) is InfeasiblePlan and again.rule == "memory_fits" and str(again).startswith("w.yaml on")
    assert SlowlinkError("x").rule == "other"


@pytest.mark.parametrize(("design", "rule"), [
    (Design("mi300x", 4, 8, 400, "infiniband", "fat-tree", 1.0), "priced"),       # no server of this GPU
    (Design("h100-sxm", 4, 8, 100, "infiniband", "fat-tree", 1.0), "priced"),      # no 100G switch priced
    (Design("gb200", 3, 8, 400, "infiniband", "fat-tree", 1.0), "fills_scale_up"),  # 3 x 4 GPUs of an NVL72
    (Design("h100-sxm", 16384, 8, 400, "infiniband", "fat-tree", 1.0), "fabric_fits"),  # > k^3/4 NICs
])
def test_hardware_refusals_carry_their_rule(design: Design, rule: str) -> None:
    with pytest.raises(SpecError) as exc:
        build_design(design, load_prices(None))
    assert exc.value.rule == rule, str(exc.value)
