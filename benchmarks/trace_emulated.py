"""Trace a 2-node `bench train` run on the emulated cluster at one link rate, predict the step at another with
`plan --trace` (the chain calibrated by the trace), measure that one too, and compare (root: network namespaces).

    python benchmarks/trace_emulated.py [RATE_A_MBIT RATE_B_MBIT ...]   (default: 200 50  50 200)
    python benchmarks/trace_emulated.py --from KEPT [RATE_A_MBIT RATE_B_MBIT ...]

With SLOWLINK_TRACE_EMULATED_KEEP=DIR every pair's traces and rows are kept in DIR/A-B/; --from DIR predicts again
from the kept ones (no emulation, no root), e.g. after a change of the calibration.

For each pair: `emulate up` a 2-node single-switch cluster (examples/emulate-flat.yaml, one CPU rank per node,
gpu cpu-1thread from examples/bench-cpu-catalog.yaml), links at RATE_A; `bench train`'s rank job in each node
(DDP over gloo, fp32, one thread, the model of tests/data/traces/bench-train-ddp-workload.yaml) with
--profile-dir A/; `emulate down`; the same at RATE_B with --profile-dir B/. Prediction:
slowlink.trace.calibrate on A's traces and the cluster the emulation is at RATE_A
(slowlink.emulate.validate.emulated_cluster), then the chain (slowlink.assess) on the cluster at RATE_B.
Measured: B's traced step (the slowest rank's median ProfilerStep, as A's calibrates) and B's timed step (no
profiler, bench train's mean) beside it.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODEL = {"layers": 1, "hidden": 64, "heads": 2, "ffn_hidden": 256, "vocab": 256, "seq_len": 32, "batch": 2,
         "steps": 12, "warmup_steps": 3, "precision": "fp32", "threads": 1}
CLUSTER = {"name": "emulate-2node-cpu", "nodes": 2, "gpus_per_node": 1, "gpu": "cpu-1thread",
           "catalog": [str(ROOT / "examples" / "bench-cpu-catalog.yaml")],
           "scale_up": {"link": "pcie-gen5", "domain_gpus": 1},
           "nics": {"compute": {"per_node": 1, "speed_gbit_s": 25}},
           "fabric": {"transport": "ethernet", "topology": "single-switch", "tiers": 1}}
NIC_BIT_S = 25e9


def rank_job(cfg_json: str, out: str) -> None:
    """Inside one emulated node: bench train's rank job; rank 0 writes the row."""
    from slowlink.bench.launch import run_rank
    from slowlink.bench.train import TrainConfig

    res = run_rank("slowlink.bench.train:train_rank", TrainConfig(**json.loads(cfg_json)), "gloo", 600)
    if int(os.environ["RANK"]) == 0:
        Path(out).write_text(json.dumps({"rows": res.rows}))  # a RankRows: the rows as bench train writes them


def _train(plan: Any, trace_dir: Path, out: Path) -> dict[str, Any]:
    from slowlink.bench.train import TrainConfig
    from slowlink.emulate import net

    cfg = TrainConfig(**MODEL, trace_dir=str(trace_dir))  # type: ignore[arg-type]
    for _ in range(2):  # a rank of the 2-core machine is sometimes killed at start-up (SIGABRT): once more
        codes = net.run(plan, [sys.executable, __file__, "--rank-job", json.dumps(asdict(cfg)), str(out)],
                        timeout_s=900)
        if not any(codes):
            break
    if any(codes):
        raise RuntimeError(f"rank exit codes {codes}")
    return dict(json.loads(out.read_text())["rows"][0])


def _cluster() -> Any:
    from slowlink.spec.cluster import cluster_from_mapping

    return cluster_from_mapping(dict(CLUSTER), "emulate-2node-cpu", ROOT)


def _plan(rate_mbit: float) -> Any:
    from slowlink.emulate.plan import build_plan

    return build_plan(_cluster(), scale=rate_mbit * 1e6 / NIC_BIT_S, nodes=2)


def case(rate_a_mbit: float, rate_b_mbit: float, work: Path) -> dict[str, float]:
    """One pair: measured at A (traced), predicted and measured at B."""
    from slowlink.emulate import net

    def run_at(rate_mbit: float, name: str) -> None:
        # a fresh emulation at this rate, so that each run starts from the same state (a live link reshaped gets
        # the same tbf, tests/emulate/test_set_rate_tc.py, but keeps the earlier run's TCP metrics)
        plan = net.up(_plan(rate_mbit))
        try:
            _train(plan, work / name, work / f"{name}.json")
        finally:
            net.down(plan.run_id)

    run_at(rate_a_mbit, "a")
    run_at(rate_b_mbit, "b")
    return predict(rate_a_mbit, rate_b_mbit, work)


def predict(rate_a_mbit: float, rate_b_mbit: float, work: Path) -> dict[str, float]:
    """A pair's prediction from the traces and rows kept in ``work`` (``a/``, ``b/``, ``a.json``, ``b.json``)."""
    from slowlink.assess import assess
    from slowlink.emulate.validate import emulated_cluster
    from slowlink.spec.workload import load_workload
    from slowlink.trace.calibrate import calibrate
    from slowlink.trace.kineto import read_kineto

    cluster = _cluster()
    at_a, at_b = emulated_cluster(cluster, _plan(rate_a_mbit)), emulated_cluster(cluster, _plan(rate_b_mbit))
    row_a, row_b = (dict(json.loads((work / f"{n}.json").read_text())["rows"][0]) for n in ("a", "b"))
    w = load_workload(ROOT / "tests" / "data" / "traces" / "bench-train-ddp-workload.yaml")
    w = replace(w, training=replace(w.training, tokens=None))
    trace_a, trace_b = read_kineto([work / "a" / "ddp-2ranks"]), read_kineto([work / "b" / "ddp-2ranks"])
    cal = calibrate(trace_a, w, at_a)
    round_trip = assess(w, cal.cluster(at_a), comm=cal.comm_cost(at_a), check_memory=False).step_time_s
    predicted = assess(w, cal.cluster(at_b), comm=cal.comm_cost(at_b), check_memory=False).step_time_s
    plain = assess(w, at_b, check_memory=False).step_time_s  # the chain without the trace, for comparison
    return {"rate_a_mbit": rate_a_mbit, "rate_b_mbit": rate_b_mbit, "traced_a_s": trace_a.step_median_s,
            "round_trip_s": round_trip, "timed_a_s": row_a["step_time_s"], "predicted_b_s": predicted,
            "traced_b_s": trace_b.step_median_s, "timed_b_s": row_b["step_time_s"], "plan_b_s": plain,
            "error": (predicted - trace_b.step_median_s) / trace_b.step_median_s,
            "round_trip_error": (round_trip - trace_a.step_median_s) / trace_a.step_median_s,
            "comm_scale": cal.comm_scale.get("all_reduce", float("nan")), "compute_scale": cal.compute_scale,
            "measured_compute_scale": cal.measured_compute_scale, "comm_spread": cal.comm_spread.get("all_reduce", 1.0),
            "residual_s": cal.residual_s, **{f"{t.term.replace(' ', '_')}_{k}": v for t in cal.terms
                                             for k, v in (("measured_s", t.measured_s), ("residual_s", t.residual_s))}}


def main(args: list[str]) -> None:
    if args[:1] == ["--rank-job"]:
        rank_job(args[1], args[2])
        return
    kept = args[1] if args[:1] == ["--from"] else None
    args = args[2:] if kept else args
    keep = os.environ.get("SLOWLINK_TRACE_EMULATED_KEEP")  # a directory: keep every run's traces there
    rates = [float(x) for x in args] or [200, 50, 50, 200]
    rows = []
    for a, b in zip(rates[::2], rates[1::2], strict=True):
        if kept:
            rows.append(predict(a, b, Path(kept) / f"{a:g}-{b:g}"))
        elif keep:
            work = Path(keep) / f"{a:g}-{b:g}"
            work.mkdir(parents=True, exist_ok=True)
            rows.append(case(a, b, work))
        else:
            with tempfile.TemporaryDirectory() as tmp:
                rows.append(case(a, b, Path(tmp)))
        print(json.dumps(rows[-1]), flush=True)
    print("| A (Mbit/s) | traced A (ms) | round trip | B (Mbit/s) | predicted B (ms) | traced B (ms) | error | "
          "timed B, no profiler (ms) | plan B without the trace (ms) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['rate_a_mbit']:g} | {r['traced_a_s'] * 1e3:.1f} | {r['round_trip_error']:+.1%} | "
              f"{r['rate_b_mbit']:g} | {r['predicted_b_s'] * 1e3:.1f} | {r['traced_b_s'] * 1e3:.1f} | "
              f"{r['error']:+.1%} | {r['timed_b_s'] * 1e3:.1f} | {r['plan_b_s'] * 1e3:.1f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
