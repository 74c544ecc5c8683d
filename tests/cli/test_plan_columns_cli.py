"""Issue 19: ``dp: auto`` plans one workload on clusters of different sizes; an infeasible cluster is a
column with its reason, not an abort; columns are keyed by file when names collide."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slowlink.cli.main import app
from slowlink.errors import InfeasiblePlan, SpecError
from slowlink.spec.cluster import load_cluster
from slowlink.spec.workload import load_workload, workload_from_mapping
from slowlink.workload.step import fit_dp, plan

EX = Path(__file__).parents[2] / "examples"
runner = CliRunner()
AUTO = {"name": "auto", "model": {"preset": "llama3-8b", "seq_len": 8192},
        "training": {"global_batch": 512, "micro_batch": 1, "precision": "bf16"},
        "parallel": {"tp": 2, "dp": "auto"}}


@pytest.fixture
def auto_file(tmp_path: Path) -> Path:
    p = tmp_path / "w.json"
    p.write_text(json.dumps(AUTO))
    return p


def test_dp_auto_is_the_gpus_over_the_model_parallel_size() -> None:
    w = workload_from_mapping(AUTO, "w")
    c = load_cluster(EX / "ref-64gpu.yaml")
    assert fit_dp(w, c).parallel.dp == 32
    fixed = load_workload(EX / "llama3-8b.yaml")  # tp 2, dp 32 written out
    assert plan(w, c).step_time_s == pytest.approx(plan(fixed, c).step_time_s)


def test_dp_auto_that_cannot_divide_is_infeasible() -> None:
    w = workload_from_mapping({**AUTO, "parallel": {"tp": 2, "pp": 3, "dp": "auto"}}, "w")
    with pytest.raises(InfeasiblePlan, match=r"parallel.dp \(auto\): tp \(2\) \* pp \(3\) \* cp \(1\) = 6 must"):
        plan(w, load_cluster(EX / "ref-64gpu.yaml"))


@pytest.mark.parametrize("bad", [0, "automatic", -1])
def test_dp_zero_or_other_words_are_refused(bad: object) -> None:
    with pytest.raises(SpecError, match=r"parallel\.dp"):
        workload_from_mapping({**AUTO, "parallel": {"tp": 2, "dp": bad}}, "w")


def test_an_infeasible_cluster_is_a_column_with_its_reason(auto_file: Path) -> None:
    args = ["plan", str(EX / "ref-64gpu.yaml"), str(EX / "rail-nvl72.yaml"), "--workload", str(auto_file)]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "infeasible" in res.output and "rail-nvl72: infeasible: training.global_batch (512)" in res.output
    js = json.loads(runner.invoke(app, [*args, "--json"]).output)["clusters"]
    assert "step_time_s" in js["ref-64gpu"]
    assert "must be divisible" in js["rail-nvl72"]["infeasible"]


def test_all_clusters_infeasible_is_an_error(auto_file: Path) -> None:
    res = runner.invoke(app, ["plan", str(EX / "rail-nvl72.yaml"), str(EX / "rail-nvl72.yaml"),
                              "--workload", str(auto_file)])
    assert res.exit_code == 2
    assert "no cluster can run this workload" in res.output and "Traceback" not in res.output


def test_columns_are_keyed_by_file_when_names_collide(tmp_path: Path, auto_file: Path) -> None:
    copy = tmp_path / "copy.yaml"
    copy.write_text((EX / "ref-64gpu.yaml").read_text())
    res = runner.invoke(app, ["plan", str(EX / "ref-64gpu.yaml"), str(copy), "--workload", str(auto_file),
                              "--json"])
    assert res.exit_code == 0, res.output
    assert set(json.loads(res.output)["clusters"]) == {str(EX / "ref-64gpu.yaml"), str(copy)}


def test_a_gpu_without_the_asked_precision_is_a_column_not_an_abort(tmp_path: Path) -> None:
    """FP8 gradients on an A100 (no FP8 tensor cores) rule out that cluster only; the H100 one still plans."""
    a100 = tmp_path / "a100.yaml"
    a100.write_text((EX / "ref-64gpu.yaml").read_text().replace("h100-sxm", "a100-80gb")
                    .replace("nvlink4", "nvlink3").replace("name: ref-64gpu", "name: ref-64gpu-a100"))
    fp8 = tmp_path / "fp8.json"
    fp8.write_text(json.dumps({**AUTO, "training": {**AUTO["training"], "grad_comm_dtype": "fp8"}}))
    res = runner.invoke(app, ["plan", str(EX / "ref-64gpu.yaml"), str(a100), "--workload", str(fp8), "--json"])
    assert res.exit_code == 0, res.output
    cols = json.loads(res.output)["clusters"]
    assert "step_time_s" in cols["ref-64gpu"]
    assert "grad_comm_dtype ('fp8') is not supported by gpu a100-80gb" in cols["ref-64gpu-a100"]["infeasible"]
