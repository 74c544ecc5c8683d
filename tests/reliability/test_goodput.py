"""Goodput joined from the step, storage and failure models: the Llama 3 405B example and the 64-GPU
reference cluster, the losses adding up, the interval choice, and the storage-less cluster."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from slowlink import units
from slowlink.errors import SpecError
from slowlink.reliability.goodput import Goodput, goodput
from slowlink.reliability.validate import cases, lost_work_case, published
from slowlink.spec.cluster import Cluster, load_cluster
from slowlink.spec.storage import Checkpoint
from slowlink.spec.workload import Workload, load_workload
from slowlink.storage.plan import plan_storage
from slowlink.workload.step import fit_dp, plan

EX = Path(__file__).parents[2] / "examples"


def _goodput(w: Workload, c: Cluster, tokens: float | None = None, steps: int | None = None,
             check_memory: bool = True) -> Goodput:
    """The reliability model at the step model's step, the storage plan's stall and checkpoint."""
    w = fit_dp(w, c)
    step = plan(w, c, check_memory=check_memory)
    return goodput(w, c, step, plan_storage(w, c, step), tokens, steps)


def _run(cluster: str, workload: str, tokens: float | None = None) -> Goodput:
    c, w = load_cluster(EX / cluster), load_workload(EX / workload)
    return _goodput(w, c, tokens, check_memory=False)


def test_llama3_405b_on_16k_h100() -> None:
    g = _run("goodput-llama3-405b-16k-h100.yaml", "goodput-llama3-405b-15t.yaml")
    js = g.to_json()
    assert set(js) >= {"mttf_h", "ettr", "ettr_monte_carlo", "best_checkpoint_interval_s", "expected_interruptions",
                       "time_to_train_days", "gpu_hours", "losses"}
    assert js["mttf_h"] == pytest.approx(54 * 24 / 419)
    assert 0.9 < js["ettr"] < 1.0 and abs(js["ettr"] - js["ettr_monte_carlo"]) < 0.02
    assert js["steps"] == -(-15e12 // (2048 * 8192))
    useful = js["steps"] * js["step_time_s"] / units.DAY
    # The failure and checkpoint losses are exactly the gap between the wall clock and the useful time.
    reliability = sum(v for k, v in js["losses"].items()
                      if k.startswith("failures") or k in ("checkpoints", "planned_interruptions"))
    assert js["time_to_train_days"] == pytest.approx(useful + reliability)
    assert js["gpu_hours"] == pytest.approx(js["time_to_train_days"] * 24 * 16384)
    sweep = js["sweep"]
    assert [p["mttf_h"] for p in sweep] == sorted((p["mttf_h"] for p in sweep), reverse=True)
    assert [p["ettr"] for p in sweep] == sorted((p["ettr"] for p in sweep), reverse=True)


def test_reference_cluster_uses_the_workloads_interval() -> None:
    g = _run("ref-64gpu.yaml", "llama3-8b-storage.yaml", tokens=1e12)
    js = g.to_json()
    assert js["gpus"] == 64 and js["checkpoint_interval_source"] == "workload checkpoint interval"
    assert js["checkpoint_interval_s"] == pytest.approx(100 * js["step_time_s"])
    assert js["checkpoint"]["mode"] == "async" and js["recovery"]["commit_lag_s"] > 0
    assert js["ettr"] > 0.99 and js["ettr_at_best_interval"] >= js["ettr"]


def test_overrides_replace_the_storage_model(tmp_path: Path) -> None:
    text = (EX / "ref-64gpu.yaml").read_text()
    bare = text[: text.index("\nstorage:")] + "\n"
    p = tmp_path / "c.yaml"
    p.write_text(bare)
    w = load_workload(EX / "llama3-70b.yaml")
    c = load_cluster(p)
    with pytest.raises(SpecError, match="storage"):
        _goodput(w, c, steps=1000)
    p.write_text(bare + "reliability: {checkpoint_s: 20, restore_s: 60, restart_overhead_s: 120}\n")
    c = load_cluster(p)
    every_30_min = replace(w, checkpoint=Checkpoint.of(interval_minutes=30))
    js = _goodput(every_30_min, c, steps=1000).to_json()
    assert js["checkpoint"]["source"] == "reliability overrides" and js["checkpoint_interval_s"] == 1800
    assert js["recovery"]["restore_s"] == 60 and js["recovery"]["restart_s"] == 120


def test_a_token_budget_is_needed() -> None:
    c, w = load_cluster(EX / "ref-64gpu.yaml"), load_workload(EX / "llama3-8b-storage.yaml")
    with pytest.raises(SpecError, match=r"training.tokens \(None\)"):
        _goodput(w, c)


def test_other_fleets_are_scored_with_their_own_rate() -> None:
    data = published()
    assert all("fleet_rate" in c for c in data["mttf"] + data["lost_work"] if c.get("scored", True))
    bloom = next(c for c in data["lost_work"] if c["id"] == "bloom-176b-lost-work")
    short, long_ = (lost_work_case({**bloom, "interval_s": t}).predicted for t in (3600, 36000))
    assert short == pytest.approx((3600 + bloom["checkpoint_s"]) / 2 / 3600, rel=0.01)  # ~ half a segment
    assert 9 * short < long_ < 10 * short  # grows a little slower than the interval: s / 2 - lambda s^2 / 12


def test_validation_cases_have_sources_and_the_calibration_is_exact() -> None:
    cs = cases()
    assert all(c.source for c in cs) and any(c.second_hand for c in cs)
    calib = next(c for c in cs if c.id == "llama3-405b-16k")
    assert not calib.scored and calib.error == pytest.approx(0, abs=1e-3)
    opt = next(c for c in cs if c.id == "opt-175b-1024")
    assert opt.predicted == pytest.approx(12.0)  # its own ~2 machines a day on the job's 128 nodes: 24 h / 2
    ettr = next(c for c in cs if "ettr" in c.id)
    assert ettr.predicted > ettr.published  # Llama 3: "more than 90%"
