"""CLI of the reliability model: `slowlink goodput` (text, JSON contract) and `slowlink validate goodput`, and
every bad input: exit 2, the field, the value and the rule named, no traceback."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slowlink.cli.main import app

EX = Path(__file__).parents[2] / "examples"
CLUSTER = EX / "ref-64gpu.yaml"
WORKLOAD = EX / "llama3-8b-storage.yaml"
CONTRACT = {"mttf_h", "ettr", "ettr_monte_carlo", "best_checkpoint_interval_s", "expected_interruptions",
            "time_to_train_days", "gpu_hours", "losses"}
runner = CliRunner()


def _with(tmp_path: Path, src: Path, extra: str) -> str:
    p = tmp_path / src.name
    p.write_text(src.read_text() + extra)
    return str(p)


def test_goodput_json_contract() -> None:
    res = runner.invoke(app, ["goodput", str(CLUSTER), str(WORKLOAD), "--tokens", "1T", "--json"])
    assert res.exit_code == 0, res.output
    js = json.loads(res.output)
    assert set(js) >= CONTRACT and js["tokens"] == 1e12
    assert js["time_to_train_days"] > js["useful_days"]


def test_goodput_text_and_steps() -> None:
    res = runner.invoke(app, ["goodput", str(CLUSTER), str(WORKLOAD), "--steps", "1000"])
    assert res.exit_code == 0, res.output
    assert "ETTR closed form / Monte Carlo" in res.output and "job size sweep" in res.output


def test_goodput_405b_example_runs() -> None:
    # with the memory check: the published layout fits (rank 1 holds the step's 16 micro-batches of its 8 layers)
    res = runner.invoke(app, ["goodput", str(EX / "goodput-llama3-405b-16k-h100.yaml"),
                              str(EX / "goodput-llama3-405b-15t.yaml"), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["mttf_h"] == pytest.approx(3.09, abs=0.01)


def test_validate_goodput() -> None:
    res = runner.invoke(app, ["validate", "goodput"])
    assert res.exit_code == 0, res.output
    assert "reliability error: mean" in res.output and "metaseq" in res.output
    assert "[second-hand]" in res.output  # shown, not eaten as rich markup
    assert "interval: mean" in res.output  # the best-interval cases are summarised apart from the fleets'
    js = json.loads(runner.invoke(app, ["validate", "goodput", "--json"]).output)
    assert js["max_abs_error"] >= js["mean_abs_error"] > 0
    assert js["by_kind"]["interval"]["scored_cases"] == 3 and {c["kind"] for c in js["cases"]} == set(js["by_kind"])


@pytest.mark.parametrize(("args", "needles"), [
    (["--tokens", "lots"], ("--tokens ('lots')", "must be a number")),
    (["--tokens", "-5"], ("--tokens ('-5')",)),
    (["--tokens", "1T", "--steps", "5"], ("give one of them",)),
    (["--steps", "0"], ("--steps (0) must be between 1 and",)),
    ([], ("training.tokens (None)",)),
])
def test_goodput_bad_options(args: list[str], needles: tuple[str, ...], cli_fails: Callable[..., str]) -> None:
    cli_fails(["goodput", str(CLUSTER), str(WORKLOAD), *args], *needles)


@pytest.mark.parametrize(("extra", "needles"), [
    ("reliability: {failures_per_1000_node_days: 0}\n",
     ("reliability.failures_per_1000_node_days", "0", "greater than 0")),
    ("reliability: {restart_overhead_s: -1}\n", ("reliability.restart_overhead_s", "-1")),
    ("reliability: {checkpoint_interval_s: fast}\n", ("reliability.checkpoint_interval_s", "fast")),
    ("reliability: {checkpoint_interval_s: 1800}\n", ("reliability.checkpoint_interval_s", "1800",
                                                     "checkpoint: {interval_minutes: 30}", "in the workload")),
    ("reliability: {mtbf: 5}\n", ("reliability.mtbf",)),
])
def test_goodput_bad_cluster_reliability(tmp_path: Path, extra: str, needles: tuple[str, ...],
                                         cli_fails: Callable[..., str]) -> None:
    cli_fails(["goodput", _with(tmp_path, CLUSTER, extra), str(WORKLOAD), "--steps", "10"], *needles)


@pytest.mark.parametrize(("tokens", "needles"), [("lots", ("training.tokens", "lots", "must be a number")),
                                                  ("0", ("training.tokens", "must be > 0"))])
def test_goodput_bad_workload_tokens(tmp_path: Path, tokens: str, needles: tuple[str, ...],
                                     cli_fails: Callable[..., str]) -> None:
    text = WORKLOAD.read_text().replace("grad_comm_dtype: bf16}", f"grad_comm_dtype: bf16, tokens: {tokens}}}")
    p = tmp_path / "w.yaml"
    p.write_text(text)
    cli_fails(["goodput", str(CLUSTER), str(p)], *needles)


def test_goodput_needs_storage_or_overrides(tmp_path: Path, cli_fails: Callable[..., str]) -> None:
    text = CLUSTER.read_text()
    p = tmp_path / "bare.yaml"
    p.write_text(text[: text.index("\nstorage:")] + "\n")
    cli_fails(["goodput", str(p), str(WORKLOAD), "--steps", "10"], "storage (None)", "reliability.restore_s")


@pytest.mark.parametrize(("args", "needles"), [
    (["--fault", "melt"], ("--fault ('melt') must be one of kill-rank, kill-node, hang, exception",)),
    (["--nproc", "1"], ("--nproc (1) must be >= 2",)),
    (["--fault-step", "0"], ("--fault-step (0) must be between 1",)),
    (["--fault-phase", "save", "--fault-step", "4"], ("must be a checkpoint step",)),
    (["--max-restarts", "-2"], ("--max-restarts (-2) must be >= 0",)),
    (["--spare"], ("--spare (True) needs --emulated CLUSTER.yaml",)),
    (["--store-node"], ("--store-node (True) needs --emulated CLUSTER.yaml",)),
    (["--spare", "--emulated", str(EX / "emulate-flat.yaml"), "--fault", "cut-link"],
     ("--spare (True) needs --fault kill-node",)),
])
def test_drill_bad_options(args: list[str], needles: tuple[str, ...], cli_fails: Callable[..., str]) -> None:
    cli_fails(["drill", *args], *needles)


def test_plan_shows_goodput_only_with_a_token_budget(tmp_path: Path) -> None:
    res = runner.invoke(app, ["plan", str(CLUSTER), str(WORKLOAD), "--json"])
    assert res.exit_code == 0 and "goodput" not in json.loads(res.output)
    w = tmp_path / "w.yaml"
    w.write_text(WORKLOAD.read_text().replace("grad_comm_dtype: bf16}", "grad_comm_dtype: bf16, tokens: 1T}"))
    js = json.loads(runner.invoke(app, ["plan", str(CLUSTER), str(w), "--json"]).output)
    assert set(js["goodput"]) >= CONTRACT
    text = runner.invoke(app, ["plan", str(CLUSTER), str(w)]).output
    assert "goodput: 1e+12 tokens in" in text
    bare = tmp_path / "bare.yaml"
    bare.write_text(CLUSTER.read_text()[: CLUSTER.read_text().index("\nstorage:")] + "\n")
    js = json.loads(runner.invoke(app, ["plan", str(bare), str(w), "--json"]).output)
    assert "storage (None)" in js["goodput"]["unavailable"]
