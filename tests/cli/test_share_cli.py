"""`slowlink share`: the JSON contract, the report, and every bad input (exit 2, field, value and rule named,
no traceback)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slowlink.cli.main import app

EX = Path(__file__).parents[2] / "examples"
DEADLOCK = EX / "share-deadlock.yaml"
CONTRACT = {"utilisation", "allocated", "fragmentation", "deadlocks", "mean_queue_s", "p95_jct_s", "slowdown_by_kind"}
runner = CliRunner()


def _edit(tmp_path: Path, old: str, new: str, src: Path = DEADLOCK) -> str:
    text = src.read_text()
    assert old in text, old
    p = tmp_path / "scenario.yaml"
    p.write_text(text.replace(old, new, 1))
    return str(p)


def test_json_has_the_contract_and_the_deadlock() -> None:
    res = runner.invoke(app, ["share", str(DEADLOCK), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    per_gpu, gang = data["policies"]["per-gpu/whole"], data["policies"]["gang/whole"]
    assert set(per_gpu) >= CONTRACT and set(gang) >= CONTRACT
    assert per_gpu["deadlocks"][0]["cycle"] == ["train-a", "train-b"]
    assert per_gpu["deadlocks"][0]["holding"]["train-a"] == {"holds": 4, "needs": 6}
    assert gang["deadlocks"] == [] and gang["finished"] == 10


def test_the_report_names_the_deadlock() -> None:
    res = runner.invoke(app, ["share", str(DEADLOCK)])
    assert res.exit_code == 0, res.output
    assert "train-a (holds 4/6 GPUs) waits for train-b (holds 4/6 GPUs) waits for train-a" in res.output


def test_set_overrides_the_scenario() -> None:
    res = runner.invoke(app, ["share", str(DEADLOCK), "--json", "--set", "scenario.cluster.nodes=2"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["policies"]["per-gpu/whole"]["deadlocks"] == []


@pytest.mark.parametrize(("old", "new", "needles"), [
    ("{scheduler: gang}", "{scheduler: gang, slicing: halves}", ["policies.1.slicing ('halves')", "whole"]),
    ("{scheduler: gang}", "{scheduler: gang, colour: red}", ["policies.1.colour: unknown key", "docs/share.md"]),
    ("{scheduler: per-gpu}", "{scheduler: per-gpu, slicing: mig}",
     ["policies.0.slicing ('mig')", "per-gpu scheduler is modelled with whole GPUs only"]),
    ("gpus: 6, duration_s: 600", "gpus: 16, duration_s: 600", ["job train-a gpus (16)", "<= the cluster's 8 GPUs"]),
    ("{scheduler: per-gpu}", "{scheduler: per-gpu, exclusive_nodes: true}",
     ["policies.0.exclusive_nodes (True): needs scheduler gang and slicing whole"]),
    ("duration_s: 600,", "duration_s: 600, comm_fraction: 1,", ["jobs.8.comm_fraction (1)", "less than 1"]),
    ("duration_s: 600,", "duration_s: 600, comm_fraction: 0.3, plan: {cluster: c.yaml, workload: w.yaml},",
     ["comm_fraction (0.3) and plan are both given"]),
    ("duration_s: 600,", "duration_s: 600, plan: {cluster: none.yaml, workload: w.yaml},",
     ["jobs.8.plan.cluster ('none.yaml'): file does not exist"]),
    ("duration_s: 10,", "duration_s: -10,", ["jobs.0.duration_s (-10)", "greater than 0"]),
    ("kind: training}", "kind: gaming}", ["jobs.8.kind ('gaming')"]),
    ("gpu: h100-sxm", "gpu: h900", ["cluster.gpu ('h900') is not in the catalog"]),
    ("id: batch-2,", "id: batch-1,", ["job id ('batch-1') is given twice"]),
    ("policies:", "trace: {path: x.csv, format: openb}\npolicies:", ["jobs, synthetic and trace (jobs, trace)"]),
    ("nodes: 1", "nodes: 0", ["cluster.nodes (0)", "greater than or equal to 1"]),
    ("{scheduler: gang}", "{scheduler: gang}\n  - {scheduler: gang, backfill: false}",
     ["policies.2 ('gang/whole') has the name of policies.1"]),
    ("duration_s: 10,", "duration_s: 10, compute_fraction: 1.5,", ["jobs.0.compute_fraction (1.5)"]),
    ("duration_s: 10,", "duration_s: 10, memory_gib: 200,", ["memory_gib (200)", "79.6 GiB"]),
])
def test_bad_input_exits_2_naming_field_value_and_rule(tmp_path: Path, old: str, new: str, needles: list[str],
                                                       cli_fails: Callable[..., str]) -> None:
    out = cli_fails(["share", _edit(tmp_path, old, new), "--json"], *needles)
    assert not out.strip().startswith("{")  # no JSON before the refusal


def test_a_bad_mig_profile_is_named(tmp_path: Path) -> None:
    p = _edit(tmp_path, "compute_fraction: 0.25, memory_gib: 10}", "compute_fraction: 0.25, mig_profile: 9g.99gb}",
              EX / "share-mig-mix.yaml")
    res = runner.invoke(app, ["share", p])
    assert res.exit_code == 2
    assert "synthetic.classes.0.mig_profile ('9g.99gb'): must be a MIG profile of h100-sxm" in res.output


def test_a_missing_trace_file_is_named(tmp_path: Path) -> None:
    p = tmp_path / "t.yaml"
    p.write_text("cluster: {nodes: 1}\npolicies: [{scheduler: gang}]\ntrace: {path: nowhere.csv, format: openb}\n")
    res = runner.invoke(app, ["share", str(p)])
    assert res.exit_code == 2
    assert "trace.path" in res.output and "does not exist" in res.output


def test_a_bad_philly_jobs_entry_exits_2_naming_it(tmp_path: Path) -> None:
    (tmp_path / "jobs.json").write_text('[{"id": "a", "num_gpus": 0, "submitted_time": "2017-10-01 00:00:00", '
                                        '"attempts": [{"start_time": "2017-10-01 00:00:00", '
                                        '"end_time": "2017-10-01 01:00:00"}]}]')
    p = tmp_path / "t.yaml"
    p.write_text("cluster: {nodes: 1}\npolicies: [{scheduler: gang}]\ntrace: {path: jobs.json, format: philly-jobs}\n")
    res = runner.invoke(app, ["share", str(p)])
    assert res.exit_code == 2, res.output
    assert "jobs.json: job 0.num_gpus (0): must be a whole number >= 1" in res.output
    assert "Traceback" not in res.output


def test_a_missing_scenario_file_is_named(tmp_path: Path) -> None:
    res = runner.invoke(app, ["share", str(tmp_path / "none.yaml")])
    assert res.exit_code == 2 and "does not exist" in res.output


def test_plot_writes_an_image(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "timeline.png"
    res = runner.invoke(app, ["share", str(DEADLOCK), "--plot", str(png)])
    assert res.exit_code == 0, res.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(("name", "needle"), [("timeline.txt", "must end in .png, .svg, .pdf"),
                                              ("no-such-folder/t.png", "does not exist")])
def test_a_bad_plot_path_is_refused_before_the_run(tmp_path: Path, name: str, needle: str) -> None:
    res = runner.invoke(app, ["share", str(DEADLOCK), "--plot", str(tmp_path / name)])
    assert res.exit_code == 2 and "--plot" in res.output and needle in res.output, res.output
    assert list(tmp_path.iterdir()) == []


def test_help_loads_no_model() -> None:
    code = ("import sys\nfrom slowlink.cli.main import app\ntry:\n    app(['share', '-h'])\nexcept SystemExit:\n"
            "    pass\nprint(sorted(m for m in sys.modules if m.split('.')[0] in {'numpy', 'simpy', 'scipy'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_an_empty_job_list_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "t.yaml"
    p.write_text("cluster: {nodes: 1}\npolicies: [{scheduler: gang}]\njobs: []\n")
    res = runner.invoke(app, ["share", str(p)])
    assert res.exit_code == 2 and "jobs" in res.output and "at least 1" in res.output, res.output
