"""Issue 19: ``--set KIND.path=value`` what-if overrides on every command that reads a spec file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slowlink.cli.main import app

EX = Path(__file__).parents[2] / "examples"
REF = str(EX / "ref-64gpu.yaml")
LLAMA = str(EX / "llama3-8b.yaml")
runner = CliRunner()


def _plan_json(*extra: str) -> dict[str, object]:
    res = runner.invoke(app, ["plan", REF, LLAMA, "--json", *extra])
    assert res.exit_code == 0, res.output
    out: dict[str, object] = json.loads(res.output)
    return out


def test_set_changes_the_cluster_and_the_workload_like_an_edited_file(tmp_path: Path) -> None:
    base = _plan_json()
    slower = _plan_json("--set", "cluster.nics.compute.speed_gbit_s=100", "--set=workload.parallel.tp=4",
                        "--set", "workload.parallel.dp=16")
    edited_c = tmp_path / "c.yaml"
    edited_w = tmp_path / "w.yaml"
    edited_c.write_text(Path(REF).read_text().replace("speed_gbit_s: 400", "speed_gbit_s: 100"))
    edited_w.write_text(Path(LLAMA).read_text())
    res = runner.invoke(app, ["plan", str(edited_c), str(edited_w), "--json", "--set", "workload.parallel.tp=4",
                              "--set", "workload.parallel.dp=16"])
    assert res.exit_code == 0, res.output
    assert "speed_gbit_s: 400" in Path(REF).read_text()
    assert json.loads(res.output)["step_time_s"] == slower["step_time_s"]
    assert slower["step_time_s"] != base["step_time_s"]


def test_set_before_the_command_works_too() -> None:
    res = runner.invoke(app, ["--set", "cluster.fabric.oversubscription=4", "plan", REF, LLAMA, "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output) == _plan_json("--set", "cluster.fabric.oversubscription=4")


def test_set_on_a_scenario_names_list_elements_by_index() -> None:
    res = runner.invoke(app, ["simulate", str(EX / "scenario-two-jobs.yaml"), "--json",
                              "--set", "scenario.traffic.0.start_us=500"])
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize(("arg", "needle"), [
    ("foo=1", "must be KIND.key.path=value"),
    ("cluster.nodes", "must be KIND.key.path=value"),
    ("cluster..nodes=2", "must be KIND.key.path=value"),
    ("cluster.nodes=", "the value is empty"),
    ("cluster.nodes=[1", "not valid YAML"),
    ("cluster.nodes=.inf", "must be a finite number"),
    ("workload.parallel.tpx=1", "(with --set workload.parallel.tpx=1): parallel.tpx: unknown key"),
    ("cluster.nodes=true", "nodes (True): must be an integer"),
    ("workload.model.preset.x=1", "model.preset is 'llama3-8b', not a mapping"),
])
def test_a_bad_set_is_one_clean_message_and_exit_2(arg: str, needle: str) -> None:
    res = runner.invoke(app, ["plan", REF, LLAMA, "--set", arg])
    assert res.exit_code == 2, res.output
    assert needle in res.output, res.output
    assert "Traceback" not in res.output


def test_a_list_index_out_of_range_is_named() -> None:
    res = runner.invoke(app, ["simulate", str(EX / "scenario-two-jobs.yaml"), "--set", "scenario.traffic.9.size=1"])
    assert res.exit_code == 2
    assert "traffic is a list of 2; name an element by its index 0..1" in res.output


def test_set_without_a_value_is_a_usage_error() -> None:
    res = runner.invoke(app, ["plan", REF, LLAMA, "--set"])
    assert res.exit_code == 2
    assert "--set needs a value" in res.output


def _floats(obj: object) -> list[float]:
    if isinstance(obj, float):
        return [obj]
    if isinstance(obj, dict):
        return [f for v in obj.values() for f in _floats(v)]
    if isinstance(obj, list):
        return [f for v in obj for f in _floats(v)]
    return []


def test_json_numbers_are_rounded_but_whole_numbers_kept() -> None:
    floats = _floats(_plan_json())
    assert floats and all(f.is_integer() or f == float(f"{f:.6g}") for f in floats)
    assert any(f != round(f) for f in floats)
    res = runner.invoke(app, ["collective", REF, "--op", "all_reduce", "--size", "1GiB", "--json"])
    assert json.loads(res.output)["size_bytes"] == 2**30
