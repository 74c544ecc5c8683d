"""`plan --trace`: the trace's step and collectives calibrate the chain on the trace's cluster (round trip: the
traced step again), the prediction for another cluster keeps plan --json's keys and adds `trace`, and a trace
that cannot be the workload's run on that cluster is a clean error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slowlink.cli.main import app
from slowlink.spec.cluster import load_cluster
from slowlink.spec.workload import load_workload
from slowlink.trace.calibrate import calibrate, slower
from slowlink.trace.kineto import read_kineto
from slowlink.workload.step import plan

DATA = Path(__file__).parents[1] / "data" / "traces"
EXAMPLES = Path(__file__).parents[2] / "examples"
TRACE, WORKLOAD = DATA / "bench-train-ddp", DATA / "bench-train-ddp-workload.yaml"
HERE, OTHER = EXAMPLES / "bench-localhost.yaml", DATA / "two-nodes-1gbit.yaml"
runner = CliRunner()


def _plan(*args: str) -> dict[str, object]:
    res = runner.invoke(app, ["plan", *args, "--json"])
    assert res.exit_code == 0, res.output
    return dict(json.loads(res.stdout))


def test_round_trip_returns_the_traced_step() -> None:
    traced = read_kineto([TRACE]).step_median_s
    got = _plan(str(HERE), str(WORKLOAD), "--trace", str(TRACE))
    assert got["step_time_s"] == pytest.approx(traced, rel=0.05)
    plain = _plan(str(HERE), str(WORKLOAD))
    assert set(plain) <= set(got) and set(got) - set(plain) == {"trace"}
    trace = got["trace"]
    assert isinstance(trace, dict) and trace["ranks"] == 2 and trace["steps"] == 3
    terms = {t["term"]: t for t in trace["measured"]}
    assert {"step", "compute", "collective all_reduce"} <= set(terms)
    assert terms["collective all_reduce"]["scale"] > 1  # gloo's CPU all_reduce is slower than a PCIe link
    assert trace["modelled"]


def test_another_fabric_is_priced_by_its_links_past_the_software() -> None:
    here = _plan(str(HERE), str(WORKLOAD), "--trace", str(TRACE))
    other = _plan(str(OTHER), str(WORKLOAD), "--trace", str(TRACE), "--trace-cluster", str(HERE))
    assert other["step_time_s"] > here["step_time_s"]  # 1 Gb/s Ethernet between the ranks instead of one host


def test_the_compute_scale_is_linear_in_the_step_model() -> None:
    w, c = load_workload(WORKLOAD), load_cluster(HERE)
    base = plan(w, c, check_memory=False).compute_s
    assert plan(w, slower(c, 3.0), check_memory=False).compute_s == pytest.approx(3 * base, rel=0.02)
    cal = calibrate(read_kineto([TRACE]), w, c)
    assert cal.compute_scale > 0 and cal.comm_scale["all_reduce"] > 0


def test_a_trace_cluster_of_another_size() -> None:
    res = runner.invoke(app, ["plan", str(HERE), str(WORKLOAD), "--trace", str(DATA / "hta-vit-rank-0.json.gz")])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "the trace's world_size is 128" in " ".join(res.output.split())


def test_a_workload_the_trace_did_not_run(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text(WORKLOAD.read_text().replace("layers: 1, hidden: 64", "layers: 96, hidden: 8192")
                   .replace("heads: 2, kv_heads: 2, ffn_hidden: 256", "heads: 64, kv_heads: 64, ffn_hidden: 32768"))
    res = runner.invoke(app, ["plan", str(HERE), str(big), "--trace", str(TRACE)])
    assert res.exit_code == 2, res.output
    assert "cannot be reached by scaling the model's compute" in " ".join(res.output.split())
