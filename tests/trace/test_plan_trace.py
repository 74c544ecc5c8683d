"""`plan --trace`: the trace's step and collectives calibrate the chain on the trace's cluster (round trip: the
traced step again), the prediction for another cluster keeps plan --json's keys and adds `trace`, and a trace
that cannot be the workload's run on that cluster is a clean error."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slowlink.assess import assess
from slowlink.cli.main import app
from slowlink.spec.cluster import Cluster, load_cluster
from slowlink.spec.workload import load_workload
from slowlink.trace.calibrate import TraceCalibration, calibrate, slower, thread_s
from slowlink.trace.kineto import read_kineto
from slowlink.workload.comm import analytical_cost
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
    split = {t["term"]: t for t in trace["terms"]}
    assert list(split) == ["compute", "exposed communication", "host", "step"]
    assert all(set(t) == {"term", "measured_s", "modelled_s", "residual_s", "carried"} for t in split.values())
    assert split["step"]["measured_s"] == pytest.approx(traced)
    assert split["step"]["residual_s"] == pytest.approx(trace["residual_s"])
    assert trace["measured_compute_scale"] > 0 and trace["comm_spread"]["all_reduce"] >= 1


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


FAST = """gpus:
  cpu-fast:   # cpu-1thread (examples/bench-cpu-catalog.yaml) with every rate doubled
    bf16_tflops: 0.0026315189875574614
    fp16_tflops: 0.0026979548763365058
    fp32_tflops: 0.12981147523269456
    hbm_gib: 23.540176391601562
    hbm_gbyte_s: 24.25762722997077
    arch: cpu
    sms: 1
    gemm_fraction: 1.0
    elementwise_gbyte_s: 5.384790965300799
    adam_ns_per_param: 5.802635326973711
    gemm_k_half: 0.0
"""


def _fast_cluster(tmp_path: Path) -> Path:
    (tmp_path / "fast.yaml").write_text(FAST)
    cluster = tmp_path / "here-fast.yaml"
    cluster.write_text(HERE.read_text().replace("gpu: cpu-1thread", "gpu: cpu-fast")
                       .replace("catalog: [bench-cpu-catalog.yaml]", "catalog: [fast.yaml]"))
    return cluster


def test_another_gpu_replaces_the_compute_class_by_class(tmp_path: Path) -> None:
    """Every rate twice as fast: each class with a rate halves (GEMMs by shape, attention, elementwise, AdamW),
    'other' stays; the compute on the new GPU is C' - K + K x ratio and the chain's compute and optimizer on it is
    that."""
    w, here = load_workload(WORKLOAD), load_cluster(HERE)
    cal = calibrate(read_kineto([TRACE]), w, here)
    fast = load_cluster(_fast_cluster(tmp_path))
    pred = cal.prediction(fast.gpu)
    by = {c.cls: c for c in pred.classes}
    for cls in ("gemm", "attention", "elementwise", "optimizer"):
        assert by[cls].measured_s > 0 and by[cls].ratio == pytest.approx(0.5, rel=1e-6), by[cls]
    assert by["other"].ratio == 1.0
    assert "aten::mm" in by["gemm"].source and "100% of the time by shape" in by["gemm"].source
    kernels = min(pred.measured_s, cal.calibrated_compute_s)
    assert cal.compute_on_s(fast.gpu) == pytest.approx(cal.calibrated_compute_s - kernels * (1 - pred.ratio))
    got = thread_s(plan(w, cal.cluster(fast), check_memory=False))  # the model's compute and optimizer
    assert got == pytest.approx(cal.compute_on_s(fast.gpu), rel=1e-6)
    assert cal.scale_on(here.gpu) == cal.compute_scale  # the trace's own GPU: the calibration, untouched


def test_plan_json_and_lines_give_the_compute_by_class(tmp_path: Path) -> None:
    fast = _fast_cluster(tmp_path)
    got = _plan(str(fast), str(WORKLOAD), "--trace", str(TRACE), "--trace-cluster", str(HERE))
    trace = got["trace"]
    assert isinstance(trace, dict) and trace["gpu"] == "cpu-1thread" and trace["target_gpu"] == "cpu-fast"
    classes = {c["class"]: c for c in trace["compute_classes"]}
    assert set(classes) == {"gemm", "attention", "elementwise", "optimizer", "other"}
    assert trace["target_compute_s"] < trace["compute_s"]
    here = _plan(str(HERE), str(WORKLOAD), "--trace", str(TRACE))
    assert got["step_time_s"] < here["step_time_s"]
    res = runner.invoke(app, ["plan", str(fast), str(WORKLOAD), "--trace", str(TRACE), "--trace-cluster", str(HERE)])
    assert res.exit_code == 0, res.output
    assert "compute on cpu-fast (op by op from cpu-1thread)" in res.output and "gemm:" in res.output


def test_a_gpu_the_model_cannot_reach_is_a_clean_error(tmp_path: Path) -> None:
    cluster = _fast_cluster(tmp_path)
    fast = (tmp_path / "fast.yaml").read_text()
    (tmp_path / "fast.yaml").write_text(fast.replace("0.12981147523269456", "1.3e6").replace(
        "24.25762722997077", "2.4e8").replace("5.384790965300799", "5.4e7").replace("5.802635326973711", "5.8e-7"))
    res = runner.invoke(app, ["plan", str(cluster), str(WORKLOAD), "--trace", str(TRACE), "--trace-cluster",
                              str(HERE)])
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert "trace: compute on cpu-fast" in " ".join(res.output.split())
    assert "cannot be reached by scaling the model's compute" in " ".join(res.output.split())


def test_a_gpu_trace_on_a_cpu_cluster_and_back(tmp_path: Path) -> None:
    res = runner.invoke(app, ["plan", str(HERE), str(WORKLOAD), "--trace", str(DATA / "hta-nccl-a100-rank-0.json.gz")])
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    text = " ".join(res.output.split())
    assert "gpu cpu-1thread, arch cpu) must be the cluster the trace ran on" in text and "GPU kernels" in text
    gpus = tmp_path / "gpus.yaml"
    gpus.write_text(HERE.read_text().replace("gpu: cpu-1thread", "gpu: a100-80gb").replace(
        "catalog: [bench-cpu-catalog.yaml]", ""))
    res = runner.invoke(app, ["plan", str(gpus), str(WORKLOAD), "--trace", str(TRACE)])
    assert res.exit_code == 2 and "the trace has CPU ops only" in " ".join(res.output.split()), res.output


def test_the_compute_is_the_measured_one_and_the_rest_is_a_residual() -> None:
    """The model's compute is matched to the trace's measured compute; the traced step's rest is the residual,
    split into the collectives' spread and host time. A step longer by 10 ms with the same work (the machine, the
    profiler) moves the host time by 10 ms, not the compute, and another fabric's step by the same 10 ms."""
    s, w, here, other = read_kineto([TRACE]), load_workload(WORKLOAD), load_cluster(HERE), load_cluster(OTHER)
    cal = calibrate(s, w, here)
    t = {x.term: x for x in cal.terms}
    assert t["compute"].measured_s == pytest.approx(max(s.ranks, key=lambda r: r.step_median_s).compute_s / 3)
    assert t["compute"].modelled_s == pytest.approx(t["compute"].measured_s, rel=1e-6)
    assert t["step"].residual_s == pytest.approx(t["exposed communication"].residual_s + t["host"].residual_s)
    assert t["step"].modelled_s + t["step"].residual_s == pytest.approx(s.step_median_s)
    longer = replace(s, ranks=tuple(replace(r, step_median_s=r.step_median_s + 0.010) for r in s.ranks))
    cal2 = calibrate(longer, w, here)
    t2 = {x.term: x for x in cal2.terms}
    assert cal2.measured_compute_scale == pytest.approx(cal.measured_compute_scale)
    assert t2["host"].residual_s - t["host"].residual_s == pytest.approx(0.010, rel=1e-3)

    def step(c: TraceCalibration, on: Cluster) -> float:
        return assess(w, c.cluster(on), comm=c.comm_cost(on), check_memory=False).step_time_s

    assert step(cal2, here) == pytest.approx(longer.step_median_s, rel=1e-6)  # the round trip
    assert step(cal2, other) - step(cal, other) == pytest.approx(0.010, rel=1e-2)


def test_the_collectives_spread_is_carried_with_them() -> None:
    """A calibrated collective costs its fastest-call calibration x its transfers' spread g: in proportion up to the
    link's model, the excess past it as on the trace's cluster; on the trace's cluster always scale x g."""
    w, here, other = load_workload(WORKLOAD), load_cluster(HERE), load_cluster(OTHER)
    cal = calibrate(read_kineto([TRACE]), w, here)
    args = ("all_reduce", 1e6, [[0, 1]])
    g = cal.comm_spread["all_reduce"]
    assert g > 1 and cal.comm_scale["all_reduce"] > 1  # gloo on one host: software-bound, x g
    bare = replace(cal, comm_spread={})
    for c in (here, other):
        assert cal.comm_cost(c)(*args) == pytest.approx(g * bare.comm_cost(c)(*args))
    a, b = cal.trace_cost(*args), analytical_cost(other)(*args)
    within = replace(cal, comm_scale={"all_reduce": 0.8}, comm_spread={"all_reduce": 1.1})
    assert within.comm_cost(here)(*args) == pytest.approx(0.88 * a)
    assert within.comm_cost(other)(*args) == pytest.approx(0.88 * b)
    past = replace(cal, comm_scale={"all_reduce": 0.8}, comm_spread={"all_reduce": 1.5})
    assert past.comm_cost(here)(*args) == pytest.approx(1.2 * a)
    assert past.comm_cost(other)(*args) == pytest.approx(b + 0.2 * a)


def test_a_trace_without_measured_compute_falls_back_to_the_step() -> None:
    """No computation in the trace: the compute is fitted so that the model returns the traced step, and the
    compute term says so; the round trip still holds."""
    s, w, here = read_kineto([TRACE]), load_workload(WORKLOAD), load_cluster(HERE)
    none = replace(s, ranks=tuple(replace(r, compute_s=0.0) for r in s.ranks))
    cal = calibrate(none, w, here)
    compute = next(t for t in cal.terms if t.term == "compute")
    assert compute.measured_s == 0 and compute.residual_s is None
    assert "fitted so that the step model returns the traced step" in compute.carried
    got = assess(w, cal.cluster(here), comm=cal.comm_cost(here), check_memory=False).step_time_s
    assert got == pytest.approx(s.step_median_s, rel=1e-6)
