"""workload.accuracy: the recorded held-out errors match what `slowlink validate` prices now, and a plan gets the
runs alike (GPU, TP, ZeRO-3) and all runs on its GPU."""

from __future__ import annotations

from slowlink.workload.accuracy import (
    DIGITS,
    RecordedRun,
    RunGroup,
    accuracy,
    recorded_runs,
)
from slowlink.workload.validate import priced_runs

REFRESH = "python -m slowlink.workload.validate"


def test_record_is_what_validate_prices_now() -> None:
    recorded = {r.id: r for r in recorded_runs()}
    priced = {r.id: r for r in priced_runs()}
    assert recorded.keys() == priced.keys(), f"held-out runs added or removed: run `{REFRESH}`"
    for rid, p in priced.items():
        r = recorded[rid]
        assert (r.gpu, r.tp, r.sharded_params) == (p.gpu, p.tp, p.sharded_params), f"{rid}: run `{REFRESH}`"
        assert abs(r.error - p.error) <= 0.5 * 10 ** -DIGITS + 1e-12, (
            f"{rid}: recorded error {r.error:+.4f}, priced now {p.error:+.4f}: the model changed, run `{REFRESH}`")


def test_alike_runs_share_gpu_tp_and_sharding() -> None:
    a = accuracy("h100-sxm", 8, False)
    assert a.alike.n > 0 and a.same_gpu.n > a.alike.n
    assert all(r.gpu == "h100-sxm" and r.tp == 8 and not r.sharded_params for r in a.alike.runs)
    assert all(r.gpu == "h100-sxm" for r in a.same_gpu.runs)
    assert {r.id for r in a.alike.runs} < {r.id for r in a.same_gpu.runs}
    every_tp8 = [r for r in recorded_runs() if r.gpu == "h100-sxm" and r.tp == 8 and not r.sharded_params]
    assert a.alike.runs == tuple(every_tp8)


def test_zero3_runs_are_apart_from_the_rest() -> None:
    sharded, plain = accuracy("a100-80gb", 1, True), accuracy("a100-80gb", 1, False)
    assert sharded.alike.n and plain.alike.n
    assert all("zero3" in r.id for r in sharded.alike.runs)
    assert not any("zero3" in r.id for r in plain.alike.runs)
    assert sharded.same_gpu == plain.same_gpu


def test_a_gpu_without_published_runs_is_unmeasured() -> None:
    a = accuracy("b200", 8, False)
    assert a.alike.n == a.same_gpu.n == 0
    assert set(a.gpus_measured) == {r.gpu for r in recorded_runs()}
    assert "b200" not in a.gpus_measured


def test_group_statistics() -> None:
    runs = tuple(RecordedRun(f"r{i}", "g", 1, False, e) for i, e in enumerate((0.10, -0.02, 0.04)))
    g = RunGroup(runs)
    assert g.n == 3
    assert abs(g.mean_error - 0.04) < 1e-12
    assert abs(g.mean_abs_error - 0.16 / 3) < 1e-12
    assert (g.low, g.high) == (-0.02, 0.10)
    empty = RunGroup(())
    assert (empty.n, empty.mean_error, empty.mean_abs_error, empty.low, empty.high) == (0, 0.0, 0.0, 0.0, 0.0)
