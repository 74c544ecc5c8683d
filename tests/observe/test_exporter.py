"""The exporter's metrics from records, nccl-tests files, plans and folders; and the alert rules through
promtool (marked ``prometheus``, skipped where promtool is absent)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from slowlink.errors import SpecError
from slowlink.observe.exporter import ResultsCollector, check_inputs, serve

DATA = Path(__file__).parents[1] / "data" / "observe"
MONITORING = Path(__file__).parents[2] / "monitoring"
H100 = DATA / "nccl-tests-2.13-all_reduce-2x8-h100.txt"
SOCKET = DATA / "nccl-tests-2.13-all_reduce-2x8-h100-socket.txt"


def _scrape(inputs: list[Path], baseline: Path | None = None) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    reg = CollectorRegistry()
    reg.register(ResultsCollector(inputs, baseline))
    out = {}
    for fam in text_string_to_metric_families(generate_latest(reg).decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _get(m: dict, name: str, **labels: str) -> float:  # type: ignore[type-arg]
    return m[(name, tuple(sorted(labels.items())))]  # type: ignore[no-any-return]


def test_busbw_and_ratio_against_a_baseline() -> None:
    m = _scrape([SOCKET], H100)
    key = {"op": "all_reduce", "ranks": "16", "size_bytes": str(2**30)}
    assert _get(m, "slowlink_collective_busbw_bytes_per_second", **key) == pytest.approx(6.0e9)
    assert _get(m, "slowlink_collective_baseline_busbw_bytes_per_second", **key) == pytest.approx(352.02e9)
    assert _get(m, "slowlink_collective_busbw_ratio", **key) == pytest.approx(6.0 / 352.02)
    assert _get(m, "slowlink_collective_largest_busbw_ratio", op="all_reduce", ranks="16") == \
        pytest.approx(6.0 / 352.02)
    assert _get(m, "slowlink_input_up", input=str(SOCKET)) == 1


def test_folder_serves_its_newest_file_and_survives_a_half_written_one(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text(H100.read_text())
    os.utime(tmp_path / "a.txt", (1, 1))
    m = _scrape([tmp_path], H100)
    assert _get(m, "slowlink_collective_largest_busbw_ratio", op="all_reduce", ranks="16") == 1.0
    (tmp_path / "b.txt").write_text(SOCKET.read_text())
    m = _scrape([tmp_path], H100)
    assert _get(m, "slowlink_collective_largest_busbw_ratio", op="all_reduce", ranks="16") < 0.1
    (tmp_path / "c.json").write_text('{"kind": "collectives", "rows": [')  # a benchmark still writing
    m = _scrape([tmp_path], H100)
    assert _get(m, "slowlink_input_up", input=str(tmp_path)) == 0


def test_plan_and_train_metrics(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"step_time_s": 7.3, "exposed_comm_s": 0.7, "compute_s": 6.6,
                                "storage": {"data_stall_s": 0.0, "checkpoint_write_s": 1.76}}))
    train = tmp_path / "train.json"
    train.write_text(json.dumps({"kind": "train", "rows": [{"mode": "ddp", "ranks": 2, "step_time_s": 0.5}]}))
    base = tmp_path / "base.json"
    base.write_text(json.dumps({"kind": "train", "rows": [{"mode": "ddp", "ranks": 2, "step_time_s": 0.4}]}))
    m = _scrape([plan, train], base)
    assert _get(m, "slowlink_plan_step_time_seconds", plan="plan") == 7.3
    assert _get(m, "slowlink_plan_checkpoint_write_seconds", plan="plan") == 1.76
    assert _get(m, "slowlink_train_step_time_ratio", mode="ddp", ranks="2") == pytest.approx(1.25)


def test_bad_inputs_refused_before_serving(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="does not exist"):
        check_inputs([tmp_path / "none.json"], None)
    with pytest.raises(SpecError, match="INPUTS"):
        check_inputs([], None)
    with pytest.raises(SpecError, match=r"--port \(70000\)"):
        serve(70000, [H100], None)


def test_serves_over_http() -> None:
    server = serve(0, [SOCKET], H100)
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/metrics", timeout=5).read().decode()
    finally:
        server.shutdown()
    assert "slowlink_collective_largest_busbw_ratio" in body


needs_promtool = pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")


@pytest.mark.prometheus
@needs_promtool
def test_promtool_check_rules() -> None:
    rules = sorted(MONITORING.glob("*.rules.yml"))
    assert rules
    res = subprocess.run(["promtool", "check", "rules", *map(str, rules)], capture_output=True, text=True,
                         timeout=60, check=False)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.prometheus
@needs_promtool
def test_promtool_test_rules() -> None:
    tests = sorted(MONITORING.glob("*.test.yml"))
    assert len(tests) >= 2
    res = subprocess.run(["promtool", "test", "rules", *(t.name for t in tests)], cwd=MONITORING,
                         capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("SUCCESS") == len(tests)


def test_grafana_dashboard_queries_only_known_metrics() -> None:
    """Every panel's query names a metric the exporter, node_exporter or dcgm-exporter serves."""
    dash = json.loads((MONITORING / "grafana-slowlink.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert len(exprs) >= 8
    assert all(any(pre in e for pre in ("slowlink_", "node_infiniband_", "DCGM_FI_")) for e in exprs)
    rules = (MONITORING / "slowlink.rules.yml").read_text()
    assert "slowlink_collective_largest_busbw_ratio" in rules and "severity: critical" in rules
