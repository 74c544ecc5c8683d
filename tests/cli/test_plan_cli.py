"""`slowlink plan` and `slowlink validate` through the CLI: results, and bad input (exit 2, no traceback)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from slowlink.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "examples" / "ref-64gpu.yaml"
runner = CliRunner()


def _workload(tmp_path: Path, **changes: dict[str, object]) -> Path:
    data = yaml.safe_load((ROOT / "examples" / "llama3-8b.yaml").read_text())
    for section, update in changes.items():
        data[section] = {**data.get(section, {}), **update}
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_plan_json_has_contract_keys(tmp_path: Path) -> None:
    res = runner.invoke(app, ["plan", str(CLUSTER), str(_workload(tmp_path)), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    for key in ("step_time_s", "mfu", "hfu", "tflops_per_gpu", "tokens_per_s", "compute_s",
                "exposed_comm_s", "comm_s", "bubble_s", "comm_compute_ratio", "memory_gib_per_gpu"):
        assert key in data
    assert 0 < data["mfu"] <= data["hfu"] < 1


def test_plan_json_names_the_stack_and_counts_collectives(tmp_path: Path) -> None:
    path = _workload(tmp_path, stack={"name": "nemo", "grad_bucket_params": 1e8})
    res = runner.invoke(app, ["plan", str(CLUSTER), str(path), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    stack = data["stack"]
    assert stack["name"] == "nemo"
    assert stack["fields"]["grad_bucket_params"] == {"value": 1e8, "source": "workload override"}
    assert "distributed_data_parallel.py" in stack["fields"]["buckets_without_overlap"]["source"]
    assert set(data["collectives_per_step"]) == {"tp", "cp", "ep", "pp", "dp"}
    assert data["collectives_per_step"]["dp"] > 0
    assert data["accuracy"]["stack"] == "nemo"


@pytest.mark.parametrize(("changes", "message"), [
    ({"parallel": {"dp": 3}}, "tp (2) * pp (1) * dp (3) * cp (1) = 6 != gpus (64)"),
    ({"parallel": {"tp": 64, "dp": 1}}, "parallel.tp (64) must divide model.heads (32)"),
    ({"parallel": {"tp": 1, "pp": 64, "dp": 1}},
     "model.layers (32) must split evenly over 64 stages: pp (64) is more stages than layers"),
    ({"parallel": {"tp": 1, "pp": 2, "dp": 32, "vp": 3}}, "model.layers (32) must split evenly over 2 stages x vp (3)"),
    ({"training": {"global_batch": 100}}, "training.global_batch (100) must be divisible by micro_batch"),
    ({"training": {"global_batch": 80}, "parallel": {"tp": 2, "pp": 4, "dp": 8, "vp": 2}},
     "parallel.vp (2): the interleaved schedule needs the micro-batches per step, training.global_batch / "
     "(micro_batch * dp) = 10, to be a multiple of parallel.pp (4)"),
    ({"model": {"preset": "llama3-8", "seq_len": 8192}}, "did you mean llama3-8b"),
    ({"training": {"micro_batch": 16, "global_batch": 512, "recompute": "none"}}, "exceeds the GPU's HBM"),
    ({"stack": {"name": "megatron"}}, "stack ('megatron') is not a bundled stack"),
    ({"stack": {"name": "deepspeed", "reshard_after_forward": "sometimes"}},
     "stack.reshard_after_forward ('sometimes')"),
    ({"stack": {"name": "fsdp"}, "parallel": {"tp": 1, "pp": 2, "dp": 32}}, "stack fsdp implements none"),
])
def test_bad_plans_exit_2_with_message(tmp_path: Path, changes: dict[str, dict[str, object]], message: str) -> None:
    res = runner.invoke(app, ["plan", str(CLUSTER), str(_workload(tmp_path, **changes))])
    assert res.exit_code == 2, res.output
    assert message in " ".join(res.output.split())
    assert "Traceback" not in res.output


def test_single_cluster_infeasible_names_workload_and_cluster_files(tmp_path: Path) -> None:
    """One cluster: the message names the workload file, the cluster file and the cluster, as a multi-cluster
    plan's error does."""
    w = _workload(tmp_path, parallel={"dp": 3})
    res = runner.invoke(app, ["plan", str(CLUSTER), str(w)])
    assert res.exit_code == 2, res.output
    assert (f"{w} on {CLUSTER} (cluster ref-64gpu): parallel: tp (2) * pp (1) * dp (3) * cp (1) = 6 != gpus (64)"
            in " ".join(res.output.split()))


def test_ep_not_dividing_experts(tmp_path: Path) -> None:
    path = tmp_path / "moe.yaml"
    path.write_text(yaml.safe_dump({"model": {"preset": "mixtral-8x7b"}, "training": {"global_batch": 64},
                                    "parallel": {"tp": 2, "dp": 32, "ep": 16}}))
    res = runner.invoke(app, ["plan", str(CLUSTER), str(path)])
    assert res.exit_code == 2
    assert "parallel.ep (16) must divide model.moe.experts (8)" in " ".join(res.output.split())


def test_validate_prints_every_case_and_summary() -> None:
    res = runner.invoke(app, ["validate"])
    assert res.exit_code == 0, res.output
    assert "k22-175b-present" in res.output and "n21-1t" in res.output
    assert "step-time error: mean" in res.output
    assert "by source: llama3" in res.output and "by gpu: h100-sxm" in res.output


def test_validate_breaks_the_held_out_error_down_by_source_and_gpu() -> None:
    """Where the held-out error lives: each source's and GPU's mean |error| is the mean over its own cases."""
    from slowlink.workload.validate import heldout_cases, mean_abs_error

    res = runner.invoke(app, ["validate", "--json"])
    assert res.exit_code == 0, res.output
    by = json.loads(res.stdout)["held_out"]["by"]
    held = heldout_cases()
    assert sum(g["cases"] for g in by["source"].values()) == len(held) == sum(g["cases"] for g in by["gpu"].values())
    dgxc = [c for c in held if c.id.startswith("dgxc-")]
    assert by["source"]["dgxc"]["mean_abs_error"] == pytest.approx(mean_abs_error(dgxc))
    assert by["source"]["dgxc"]["mean_error"] == pytest.approx(sum(c.error for c in dgxc) / len(dgxc))
    assert set(by["gpu"]) == {"a100-80gb", "h100-sxm"}
    # by GPU and TP, ZeRO-3 apart: the grouping plan's accuracy sentence uses (workload.accuracy)
    assert sum(g["cases"] for g in by["gpu_tp"].values()) == len(held)
    tp8 = [c for c in held if c.gpu == "h100-sxm" and c.tp == 8 and not c.sharded_params]
    assert by["gpu_tp"]["h100-sxm tp8"]["cases"] == len(tp8) > 0
    assert by["gpu_tp"]["h100-sxm tp8"]["mean_error"] == pytest.approx(sum(c.error for c in tp8) / len(tp8))
    zero3 = [c for c in held if c.sharded_params]
    assert zero3 and by["gpu_tp"]["a100-80gb tp1 zero3"]["cases"] == len(zero3)


def test_scale_json_and_bad_mode(tmp_path: Path) -> None:
    res = runner.invoke(app, ["scale", str(CLUSTER), str(_workload(tmp_path)), "--nodes", "1,2,4", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["points"]
    assert [r["nodes"] for r in rows] == [1, 2, 4] and rows[0]["scaling_efficiency"] == 1.0
    bad = runner.invoke(app, ["scale", str(CLUSTER), str(_workload(tmp_path)), "--mode", "weak"])
    assert bad.exit_code == 2 and "--mode ('weak') must be" in bad.output


def test_plan_json_names_bottleneck_and_checked_advice(tmp_path: Path) -> None:
    eth = ROOT / "examples" / "ref-64gpu-25gbe.yaml"
    res = runner.invoke(app, ["plan", str(eth), str(_workload(tmp_path)), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert "DP gradient reduction" in data["bottleneck"]
    assert set(data["comm_s"]) == {"tp", "cp", "ep", "pp", "dp"}
    assert all(a["step_time_s"] < data["step_time_s"] for a in data["advice"])


def test_plan_several_clusters_side_by_side(tmp_path: Path) -> None:
    files = [str(ROOT / "examples" / f) for f in ("ref-64gpu.yaml", "ref-64gpu-roce.yaml", "ref-64gpu-25gbe.yaml")]
    res = runner.invoke(app, ["plan", *files, "--workload", str(_workload(tmp_path)), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)["clusters"]
    assert list(data) == ["ref-64gpu", "ref-64gpu-roce", "ref-64gpu-25gbe"]
    assert data["ref-64gpu-25gbe"]["step_time_s"] > data["ref-64gpu"]["step_time_s"]


def test_plan_bad_fidelity_exit_2(tmp_path: Path) -> None:
    res = runner.invoke(app, ["plan", str(CLUSTER), str(_workload(tmp_path)), "--fidelity", "exact"])
    assert res.exit_code == 2
    assert "--fidelity ('exact') must be one of analytical, flow" in " ".join(res.output.split())


def test_scale_names_dp_on_25gbe(tmp_path: Path) -> None:
    eth = ROOT / "examples" / "ref-64gpu-25gbe.yaml"
    res = runner.invoke(app, ["scale", str(eth), str(_workload(tmp_path)), "--nodes", "1,2,8",
                              "--mode", "per-gpu-batch"])
    assert res.exit_code == 0, res.output
    assert "DP gradient reduction" in " ".join(res.output.split())


@pytest.mark.parametrize(("args", "message"), [
    (["--nodes", "1,x"], "--nodes ('1,x') must be comma-separated integers"),
    (["--mode", "weak"], "--mode ('weak') must be one of global-batch, per-gpu-batch"),
    (["--nodes", "3"], "training.global_batch (512) must be divisible by micro_batch (1) * dp (12)"),
])
def test_scale_bad_input_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    res = runner.invoke(app, ["scale", str(CLUSTER), str(_workload(tmp_path)), *args])
    assert res.exit_code == 2
    assert message in " ".join(res.output.split())


def test_ep_not_dividing_dp(tmp_path: Path) -> None:
    path = tmp_path / "moe.yaml"
    path.write_text(yaml.safe_dump({"model": {"preset": "mixtral-8x7b"}, "training": {"global_batch": 60},
                                    "parallel": {"tp": 4, "dp": 12, "pp": 1, "cp": 1, "ep": 8}}))
    res = runner.invoke(app, ["plan", str(load_six_node_cluster(tmp_path)), str(path)])
    assert res.exit_code == 2
    assert "parallel.ep (8) must divide dp (12)" in " ".join(res.output.split())


def load_six_node_cluster(tmp_path: Path) -> Path:
    data = yaml.safe_load(CLUSTER.read_text())
    data["nodes"] = 6
    path = tmp_path / "six.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_plan_flow_fidelity_has_the_same_schema_and_agrees_on_a_non_blocking_fabric(tmp_path: Path) -> None:
    wl = str(_workload(tmp_path))
    analytical = runner.invoke(app, ["plan", str(CLUSTER), wl, "--json"])
    flow = runner.invoke(app, ["plan", str(CLUSTER), wl, "--json", "--fidelity", "flow"])
    assert flow.exit_code == 0, flow.output
    a, f = json.loads(analytical.stdout), json.loads(flow.stdout)
    assert set(a) == set(f)
    assert f["compute_s"] == a["compute_s"]
    # Same compute, comm from the simulator: on a 1:1 fat tree the two fidelities differ by little.
    assert f["step_time_s"] == pytest.approx(a["step_time_s"], rel=0.1)
    assert f["comm_s"]["dp"] > 0


def test_plan_unknown_fidelity_is_a_clean_error(tmp_path: Path) -> None:
    res = runner.invoke(app, ["plan", str(CLUSTER), str(_workload(tmp_path)), "--fidelity", "packet"])
    assert res.exit_code == 2
    assert "packet" in res.output
    assert "Traceback" not in res.output


def test_validate_fail_above_is_a_gate() -> None:
    from slowlink.workload.validate import cases, heldout_cases, mean_abs_error

    worst = max(mean_abs_error(cases()), mean_abs_error(heldout_cases())) * 100
    res = runner.invoke(app, ["validate", "--fail-above", f"{worst * 0.9:.3f}"])
    assert res.exit_code == 1 and "above --fail-above" in res.output
    assert runner.invoke(app, ["validate", "--fail-above", f"{worst * 1.1:.3f}"]).exit_code == 0
    bad = runner.invoke(app, ["validate", "--fail-above", "-1"])
    assert bad.exit_code == 2 and "--fail-above" in bad.output


def test_scale_fidelity_flow_prices_each_size_with_the_simulator(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """--fidelity flow: every node count is priced by the flow simulator (its own resized cluster), the JSON
    says so, and the progress bar begins once per node count."""
    from slowlink import progress
    from slowlink.sim import fidelity

    priced: list[int] = []
    real = fidelity.comm_cost
    import slowlink.cli.plan as cli_plan

    for where in (fidelity, cli_plan):  # wherever the command looks it up
        if hasattr(where, "comm_cost"):
            monkeypatch.setattr(where, "comm_cost", lambda f, c: priced.append(c.nodes) or real(f, c))
    began: list[str] = []
    real_begin = progress.Steps.begin
    monkeypatch.setattr(progress.Steps, "begin", lambda self, what: began.append(what) or real_begin(self, what))
    w = str(_workload(tmp_path))
    flow = runner.invoke(app, ["scale", str(CLUSTER), w, "--nodes", "2,8", "--fidelity", "flow", "--json"])
    assert flow.exit_code == 0, flow.output
    js = json.loads(flow.stdout)
    assert js["fidelity"] == "flow" and [p["nodes"] for p in js["points"]] == [2, 8]
    assert priced == [2, 8] and began == ["2 nodes", "8 nodes"]
    bad = runner.invoke(app, ["scale", str(CLUSTER), w, "--fidelity", "exact"])
    assert bad.exit_code == 2 and "--fidelity ('exact') must be one of" in bad.output


def test_scale_error_names_both_files(cli_fails: Callable[..., str]) -> None:
    # 3 nodes x 8 GPUs / tp 2 = dp 12, which does not divide the global batch of 512 (with 1 and 2 nodes it would
    # be a refused row of its own: tests/test_scale.py)
    cli_fails(["scale", "examples/ref-64gpu.yaml", "examples/llama3-8b.yaml", "--nodes", "3"],
              "examples/llama3-8b.yaml on examples/ref-64gpu.yaml (cluster ref-64gpu):",
              "must be divisible by micro_batch")


def test_plan_reports_the_measured_error_of_the_runs_alike(tmp_path: Path) -> None:
    """The terminal and --json carry the held-out runs alike (GPU, TP) and their error (workload.accuracy)."""
    from slowlink.workload.accuracy import accuracy

    w = _workload(tmp_path, parallel={"tp": 8, "dp": 8})
    expected = accuracy("h100-sxm", 8, False)
    assert expected.alike.n > 0
    res = runner.invoke(app, ["plan", str(CLUSTER), str(w)])
    assert res.exit_code == 0, res.output
    assert (f"accuracy: on {expected.alike.n} held-out h100-sxm runs at TP 8 measured steps were "
            f"{expected.alike.mean_error:.1%} longer") in " ".join(res.stdout.split())
    res = runner.invoke(app, ["plan", str(CLUSTER), str(w), "--json"])
    acc = json.loads(res.stdout)["accuracy"]
    assert acc["alike"]["runs"] == [r.id for r in expected.alike.runs]
    assert (acc["gpu"], acc["tp"], acc["sharded_params"]) == ("h100-sxm", 8, False)


def test_plan_says_how_full_the_most_loaded_gpu_is_and_where() -> None:
    # pp 1: the one stage holds both ends and the logits; pp 4 (llama3-70b example): the first stage, its embedding
    # and 4 + 3/5 stages' worth of activations, is the most loaded; the JSON carries the same parts and the stage
    res = runner.invoke(app, ["plan", str(CLUSTER), str(ROOT / "examples" / "llama3-8b.yaml")])
    assert res.exit_code == 0, res.output
    line = next(x for x in res.output.splitlines() if "memory per GPU" in x and "of 79.6 GiB" in x)
    assert "pipeline stage" not in line and "logits 2.9" in line and line.endswith("workspace 2.0 GiB")
    res = runner.invoke(app, ["plan", str(CLUSTER), str(ROOT / "examples" / "llama3-70b.yaml")])
    assert "on the first pipeline stage (the most loaded)" in res.output and "logits 0.0" in res.output
    js = json.loads(runner.invoke(app, ["plan", str(CLUSTER), str(ROOT / "examples" / "llama3-70b.yaml"),
                                        "--json"]).stdout)
    assert js["memory"]["stage"] == "first" and js["memory"]["total_gib"] == js["memory_gib_per_gpu"]
