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
from slowlink.reliability.goodput import failures, goodput
from slowlink.spec.cluster import cluster_from_mapping, load_cluster
from slowlink.spec.storage import Checkpoint
from slowlink.spec.workload import Workload, load_workload
from slowlink.storage.plan import plan_storage
from slowlink.workload.step import fit_dp, plan

EX = Path(__file__).resolve().parents[1] / "examples"
REF = load_cluster(EX / "ref-64gpu.yaml")  # 64 H100
A100 = cluster_from_mapping(parse_text((EX / "ref-64gpu.yaml").read_text().replace("gpu: h100-sxm", "gpu: a100-80gb"),
                                       "a100", False))


def _w(**changes: dict[str, Any]) -> Workload:
    w = load_workload(EX / "llama3-8b.yaml")
    return replace(w, **{k: replace(getattr(w, k), **v) for k, v in changes.items()})


@pytest.mark.parametrize(("changes", "rule"), [
    ({"parallel": {"dp": 3}}, "parallel_divides"),
    ({"parallel": {"tp": 3, "dp": 1}}, "parallel_divides"),
    ({"parallel": {"tp": 64, "dp": 1}}, "tp_divides_heads"),
    ({"parallel": {"pp": 64, "tp": 1, "dp": 1}}, "pp_divides_layers"),
    ({"training": {"global_batch": 100}}, "batch_divides"),
    ({"training": {"micro_batch": 64, "global_batch": 64 * 32}}, "memory_fits"),
    ({"training": {"precision": "fp8"}}, "precision_supported"),
    ({"parallel": {"pp": 2, "vp": 2, "dp": 16}, "training": {"global_batch": 48}}, "interleave_divides_batch"),
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


MIXTRAL = load_workload(EX / "mixtral-8x7b.yaml")  # 8 experts


@pytest.mark.parametrize(("parallel", "rule"), [({"ep": 16, "dp": 16, "tp": 4}, "ep_divides_experts"),
                                                ({"ep": 8, "dp": 4, "tp": 16}, "ep_divides_dp")])
def test_expert_parallelism_names_its_rule(parallel: dict[str, int], rule: str) -> None:
    w = replace(MIXTRAL, parallel=replace(MIXTRAL.parallel, **parallel))
    with pytest.raises(InfeasiblePlan) as exc:
        plan(w, REF, check_memory=False)
    assert exc.value.rule == rule, str(exc.value)


def test_the_failure_model_names_its_rules(tmp_path: Path) -> None:
    text = (EX / "ref-64gpu.yaml").read_text()
    bare = tmp_path / "bare.yaml"
    bare.write_text(text[: text.index("\nstorage:")] + "\n")
    w = fit_dp(load_workload(EX / "llama3-8b.yaml"), REF)
    step = plan(w, REF)
    with pytest.raises(SpecError) as no_budget:
        goodput(w, REF, step, plan_storage(w, REF, step))
    assert no_budget.value.rule == "budget_given"
    c = load_cluster(bare)
    with pytest.raises(SpecError) as no_storage:
        failures(w, c, plan_storage(w, c, step))
    assert no_storage.value.rule == "storage_given"
    never = replace(w, checkpoint=Checkpoint.of(interval_minutes=1e7))  # 19 years between checkpoints
    with pytest.raises(InfeasiblePlan) as exc:
        failures(never, REF, plan_storage(never, REF, step))
    assert exc.value.rule == "segment_completes"
