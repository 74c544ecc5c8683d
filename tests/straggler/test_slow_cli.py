"""CLI of the straggler area: `degraded` and `jitter` answer with the contract's keys; every bad input
exits 2 naming the field, the value and the rule, without a traceback."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from typer.testing import CliRunner

from slowlink.cli.main import app

EX = Path(__file__).parents[2] / "examples"
CLUSTER = EX / "straggler-64node.yaml"
LLAMA = EX / "straggler-llama3-70b.yaml"
runner = CliRunner()


def _edit(tmp_path: Path, old: str, new: str) -> str:
    text = CLUSTER.read_text()
    assert old in text, old
    p = tmp_path / CLUSTER.name
    p.write_text(text.replace(old, new, 1))
    return str(p)


def test_degraded_json_names_the_part_and_the_dimension() -> None:
    res = runner.invoke(app, ["degraded", str(CLUSTER), str(LLAMA), "--json", "--fidelity", "analytical"])
    assert res.exit_code == 0, res.output
    js = json.loads(res.output)["analytical"]
    assert js["degraded_step_s"] > js["healthy_step_s"]
    assert js["pays"] in ("dp", "pp")
    assert js["degraded_by"][0]["part"] == "node 3 NIC 0 at 50%"
    assert js["degraded_by"][0]["slowdown"] > 0


def test_degraded_table_shows_both_fidelities() -> None:
    res = runner.invoke(app, ["degraded", str(CLUSTER), str(LLAMA)])
    assert res.exit_code == 0, res.output
    assert "analytical" in res.output and "flow" in res.output and "dimension that pays" in res.output


def test_jitter_json_points() -> None:
    res = runner.invoke(app, ["jitter", str(CLUSTER), str(LLAMA), "--gpus", "8,64", "--cv", "0.02",
                              "--trials", "4", "--json"])
    assert res.exit_code == 0, res.output
    js = json.loads(res.output)
    assert [p["gpus"] for p in js["points"]] == [8, 64]
    assert all(abs(p["error"]) < 0.02 and p["loss"] > 0 for p in js["points"])


def test_bad_inputs_exit_2(tmp_path: Path, cli_fails: Callable[..., str]) -> None:
    cli_fails(["degraded", str(CLUSTER), str(LLAMA), "--fidelity", "exact"], "--fidelity ('exact')", "must be one of")
    cli_fails(["jitter", str(CLUSTER), str(LLAMA), "--gpus", "8,x"], "--gpus ('8,x')", "comma-separated")
    cli_fails(["jitter", str(CLUSTER), str(LLAMA), "--cv", "2"], "--cv (2.0) must be between 0 and 1")
    # refused before any file is read or model run (it took 3-4 s: issue 39): a missing cluster is not reached
    cli_fails(["jitter", "no-such-cluster.yaml", str(LLAMA), "--cv", "2"], "--cv (2.0) must be between 0 and 1")
    cli_fails(["jitter", str(CLUSTER), str(LLAMA), "--distribution", "cauchy"], "distribution ('cauchy')")
    cli_fails(["jitter", str(CLUSTER), str(LLAMA), "--trials", "1"], "--trials (1) must be >= 2")
    cli_fails(["jitter", str(CLUSTER), str(LLAMA), "--gpus", "0"], "--gpus ('0')", "must be one or more counts >= 1")
    bad = _edit(tmp_path, "{node: 3, nic: 0, rate: 0.5}", "{node: 64, nic: 0, rate: 0.5}")
    cli_fails(["degraded", bad, str(LLAMA)], "degraded.0.node (64) must be < nodes (64)")
    bad = _edit(tmp_path, "{node: 3, nic: 0, rate: 0.5}", "{node: 3, nic: 0, rate: 0.5, speed: 2}")
    cli_fails(["degraded", bad, str(LLAMA)], "degraded.0.speed: unknown key")
    bad = _edit(tmp_path, "{node: 3, nic: 0, rate: 0.5}", '{link: "leaf:99->spine:0", rate: 0.5}')
    cli_fails(["degraded", bad, str(LLAMA), "--fidelity", "flow"], "degraded.link ('leaf:99->spine:0')",
           "is not a link of the fabric")


def test_find_slow_bad_inputs_exit_2(tmp_path: Path, cli_fails: Callable[..., str]) -> None:
    emu = str(EX / "straggler-emulate.yaml")
    cli_fails(["find-slow"], "--emulated/--record ((None, None)) give exactly one")
    cli_fails(["find-slow", "--emulated", emu, "--op", "broadcast"],
              "--op ('broadcast') must be all_reduce or all_to_all")
    cli_fails(["find-slow", "--emulated", emu, "--iters", "0"], "--iters (0) must be >= 1")
    cli_fails(["find-slow", "--emulated", emu, "--size", "3"], "--size (3)", "multiple of 4 B")
    cli_fails(["find-slow", "--emulated", emu, "--size", "lots"], "--size")
    cli_fails(["find-slow", "--emulated", emu, "--run-id", "sw-1"], "--run-id ('sw-1') must be letters and digits")


def test_plan_and_collective_json_report_degraded_by() -> None:
    res = runner.invoke(app, ["plan", str(CLUSTER), str(LLAMA), "--json"])
    assert res.exit_code == 0, res.output
    js = json.loads(res.output)
    assert js["degraded_by"][0]["part"] == "node 3 NIC 0 at 50%"
    assert js["step_time_s"] == js["degraded_by"][0]["step_time_s"] > js["healthy_step_s"]
    res = runner.invoke(app, ["collective", str(CLUSTER), "--op", "all_reduce", "--size", "1GiB", "--json"])
    assert res.exit_code == 0, res.output
    js = json.loads(res.output)
    assert "node 3 NIC 0 at 50%" in js["bottleneck"]
    assert 0.5 < js["degraded_by"][0]["slowdown"] <= 1.0


def test_plan_json_reports_the_jitter_of_the_cluster_variability() -> None:
    res = runner.invoke(app, ["plan", str(CLUSTER), str(LLAMA), "--json"])
    js = json.loads(res.output)["jitter"]
    assert js["gpus"] == 512 and js["compute_cv"] == 0.02 and js["syncs"] == 33
    assert 0.0 < js["loss"] < 0.2


def _train_record(tmp_path: Path, times: list[float], hosts: list[str], kind: str = "train") -> str:
    row = {"mode": "ddp", "ranks": len(times), "step_time_s": max(times) * 1.2, "rank_compute_s": times}
    p = tmp_path / "train.json"
    p.write_text(json.dumps({"kind": kind, "env": {"hostnames": hosts}, "rows": [row]}))
    return str(p)


def test_find_slow_names_the_slow_rank_and_node_from_a_train_record(tmp_path: Path) -> None:
    rec = _train_record(tmp_path, [0.10, 0.10, 0.13, 0.10], ["a", "a", "b", "b"])
    res = runner.invoke(app, ["find-slow", "--record", rec, "--json"])
    assert res.exit_code == 0, res.output
    (s,) = json.loads(res.output)["suspects"]
    assert (s["kind"], s["id"], s["unit"]) == ("rank", "rank 2", "slower") and abs(s["slowdown"] - 0.3) < 1e-9
    rec = _train_record(tmp_path, [0.10, 0.10, 0.13, 0.14], ["a", "a", "b", "b"])
    res = runner.invoke(app, ["find-slow", "--record", rec])
    assert res.exit_code == 0 and "node" in res.output and "all 2 of its ranks" in res.output, res.output


def test_find_slow_record_without_per_rank_times_exits_2(tmp_path: Path, cli_fails: Callable[..., str]) -> None:
    rec = tmp_path / "old.json"
    rec.write_text(json.dumps({"kind": "train", "rows": [{"mode": "ddp", "ranks": 2, "step_time_s": 1.0}]}))
    cli_fails(["find-slow", "--record", str(rec)], "rows.rank_compute_s (None) is missing")
    cli_fails(["find-slow", "--record", str(tmp_path / "none.json")], "does not exist")
    cli_fails(["find-slow", "--record", str(rec), "--emulated", str(EX / "straggler-emulate.yaml")],
           "give exactly one")


def _collectives_record(tmp_path: Path, waits: list[float] | None, hosts: list[str]) -> str:
    n = len(hosts)
    row = {"op": "all_reduce", "size_bytes": 1048576, "ranks": n, "time_s": 3e-3, "busbw_gbyte_s": 1.0,
           "rank_time_s": [3e-3] * n}
    if waits is not None:
        row["rank_wait_s"] = waits
    p = tmp_path / "coll.json"
    p.write_text(json.dumps({"kind": "collectives", "env": {"hostnames": hosts}, "rows": [row]}))
    return str(p)


def test_find_slow_names_the_late_rank_of_a_collectives_record(tmp_path: Path) -> None:
    rec = _collectives_record(tmp_path, [3e-3, 1e-3, 3e-3, 3e-3], ["a", "a", "b", "b"])
    res = runner.invoke(app, ["find-slow", "--record", rec, "--json"])
    assert res.exit_code == 0, res.output
    (s,) = json.loads(res.output)["suspects"]
    assert (s["kind"], s["id"]) == ("rank", "rank 1") and abs(s["slowdown"] - 2.0) < 1e-9
    rec = _collectives_record(tmp_path, [3e-3, 3e-3, 1e-3, 1e-3], ["a", "a", "b", "b"])
    res = runner.invoke(app, ["find-slow", "--record", rec])
    assert res.exit_code == 0 and "all 2 of its ranks arrive late" in res.output, res.output


def test_find_slow_collectives_record_without_waits_exits_2(tmp_path: Path, cli_fails: Callable[..., str]) -> None:
    rec = _collectives_record(tmp_path, None, ["a", "b"])
    cli_fails(["find-slow", "--record", rec], "rows.rank_wait_s (None) is missing", "over gloo")
    rec = _collectives_record(tmp_path, [1e-3], ["a", "b"])
    cli_fails(["find-slow", "--record", rec], "rank_wait_s has 1 values: must have one per rank (2)")
