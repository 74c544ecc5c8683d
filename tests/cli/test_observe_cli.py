"""CLI of the observe area: `read ...` and `doctor` contracts, exit codes, and bad inputs (exit 2, the line
or field and the value named, no traceback)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slowlink.cli.main import app

DATA = Path(__file__).parents[1] / "data" / "observe"
H100 = DATA / "nccl-tests-2.13-all_reduce-2x8-h100.txt"
SOCKET = DATA / "nccl-tests-2.13-all_reduce-2x8-h100-socket.txt"
runner = CliRunner()


def test_read_nccl_tests_json_contract(tmp_path: Path) -> None:
    out = tmp_path / "rec.json"
    res = runner.invoke(app, ["read", "nccl-tests", str(H100), "--json", "--out", str(out)])
    assert res.exit_code == 0, res.output
    rec = json.loads(res.stdout)
    assert rec["kind"] == "collectives" and len(rec["rows"]) == 11
    assert {"size_bytes", "time_s", "algbw_gbyte_s", "busbw_gbyte_s", "wrong"} <= set(rec["rows"][0])
    assert json.loads(out.read_text())["rows"][-1]["busbw_gbyte_s"] == pytest.approx(352.02)


def test_compare_and_baseline_take_nccl_tests_files(tmp_path: Path) -> None:
    res = runner.invoke(app, ["baseline", "save", "bringup", str(H100), "--dir", str(tmp_path)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["compare", "bringup", str(SOCKET), "--dir", str(tmp_path)])
    assert res.exit_code == 1 and "11 of 11 rows regressed" in res.output
    res = runner.invoke(app, ["compare", "bringup", str(H100), "--dir", str(tmp_path)])
    assert res.exit_code == 0 and "no regression" in res.output


def test_read_nccl_log_json_contract() -> None:
    res = runner.invoke(app, ["read", "nccl-log", str(DATA / "nccl-log-2.18-socket-fallback-2x2.log"), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert {"nccl_version", "ranks", "nodes", "transports", "channels", "algorithms", "warnings"} <= set(d)
    assert d["transports"]["NET/Socket"] == 5 and d["socket_fallback"] is True


@pytest.mark.parametrize(("cmd", "name", "needle"), [
    ("nccl-log", "nccl-log-2.18-ib-2x2.log", "NET/IB x7"),
    ("ibstat", "ibstat-4port-one-degraded.txt", "Polling"),
    ("nvidia-smi", "nvidia-smi-query-8xh100-throttled.csv", "hw_thermal_slowdown"),
    ("nccl-tests", "nccl-tests-legacy-all_reduce-1x8-v100.txt", "legacy"),
])
def test_read_tables(cmd: str, name: str, needle: str) -> None:
    res = runner.invoke(app, ["read", cmd, str(DATA / name)])
    assert res.exit_code == 0, res.output
    assert needle in res.output


def test_doctor_exit_codes_and_json() -> None:
    res = runner.invoke(app, ["doctor", str(DATA / "nccl-log-2.18-socket-fallback-2x2.log"), "--json"])
    assert res.exit_code == 3, res.output
    d = json.loads(res.stdout)
    assert d["findings"][0].keys() >= {"layer", "severity", "what", "evidence", "fix"}
    assert any(f["severity"] == "error" and f["layer"] == "transport" for f in d["findings"])
    assert runner.invoke(app, ["doctor", str(DATA / "ibstat-2port-healthy.txt")]).exit_code == 0
    res = runner.invoke(app, ["doctor", str(DATA / "nvidia-smi-query-8xh100-throttled.csv"),
                              str(DATA / "nvidia-smi-query-2xa100-idle.csv")])
    assert res.exit_code == 3 and "GPU driver differs" in res.output


def test_doctor_table_keeps_bracketed_evidence() -> None:
    res = runner.invoke(app, ["doctor", str(DATA / "nccl-log-2.18-socket-fallback-2x2.log")])
    assert "[receive]" in res.output or "[send]" in res.output


def test_bad_inputs(tmp_path: Path, cli_fails: Callable[..., str]) -> None:
    garbled = tmp_path / "all_reduce_perf.txt"
    garbled.write_text(H100.read_text().replace("136.6  122.81", "136.6  12?.81"))
    cli_fails(["read", "nccl-tests", str(garbled)], "all_reduce_perf.txt:32:", "column algbw ('12?.81')",
           "16777216")
    cli_fails(["compare", str(H100), str(garbled)], ":32:", "must be a number")
    cli_fails(["read", "nccl-tests", str(tmp_path / "missing.txt")], "does not exist")
    cli_fails(["read", "nccl-tests", str(H100), "--op", "allreduce"], "--op ('allreduce')")
    cli_fails(["read", "nccl-log", str(H100.parent / "ibstat-2port-healthy.txt")], "no NCCL log line")
    cli_fails(["read", "ibstat", str(H100)], "is not ibstat output")
    cli_fails(["read", "nvidia-smi", str(H100)], "CSV header with 'index'")
    cli_fails(["doctor"], "FILES (none)")
    cli_fails(["doctor", str(H100), "--tolerance", "0"], "--tolerance (0%)")
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n")
    cli_fails(["doctor", str(notes)], "notes.txt", "is not nccl-tests output")
    cli_fails(["doctor", str(H100), "--cluster", str(notes)], "notes.txt")


def test_calibrate_takes_an_nccl_tests_file(tmp_path: Path) -> None:
    """The fixture was made from t = 48 us + S x 2(n-1)/n / 355 GB/s: calibrate recovers both."""
    cluster = tmp_path / "c.yaml"
    cluster.write_text((Path(__file__).parents[2] / "examples" / "ref-64gpu.yaml").read_text())
    res = runner.invoke(app, ["calibrate", str(H100), "--cluster", str(cluster), "--out", str(tmp_path / "p.yaml"),
                              "--json"])
    assert res.exit_code == 0, res.output
    fit = json.loads(res.stdout)["fits"][0]
    assert fit["busbw_gbyte_s"] == pytest.approx(355.0, rel=0.01)
    assert fit["hop_latency_us"] * 2 * 15 == pytest.approx(48.0, rel=0.05)  # 2(n-1) ring steps of latency


def test_read_counters(cli_fails: Callable[..., str]) -> None:
    res = runner.invoke(app, ["read", "counters", str(DATA / "perfquery-symbol-errors.txt"), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["errors"]["SymbolErrorCounter"] == 1843
    cli_fails(["read", "counters", str(H100)], "neither perfquery nor ethtool")


def test_read_topo(cli_fails: Callable[..., str]) -> None:
    res = runner.invoke(app, ["read", "topo", str(DATA / "nvidia-smi-topo-m-4gpu-2nic.txt"), "--json"])
    assert res.exit_code == 0, res.output
    assert [g["gdr"] for g in json.loads(res.stdout)] == [True, True, False, False]
    cli_fails(["read", "topo", str(H100)], "not nvidia-smi topo -m")
