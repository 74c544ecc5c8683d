"""One chain: the same files give the same step, ETTR and cost in ``plan``, ``goodput``, ``cost`` and ``search``
(run through the commands on the bundled examples: one with a data stall, one with failures priced), and a part
that cannot be priced is said once, the same way everywhere."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from slowlink.assess import Budget, assess
from slowlink.cli.main import app
from slowlink.errors import InfeasiblePlan
from slowlink.spec.cluster import load_cluster
from slowlink.spec.workload import load_workload

EX = Path(__file__).resolve().parents[1] / "examples"
NFS, VIDEO = str(EX / "ref-64gpu-nfs.yaml"), str(EX / "video-8b-files.yaml")  # a 0.5 s data stall per step
REF, STORAGE = str(EX / "ref-64gpu.yaml"), str(EX / "llama3-8b-storage.yaml")  # failures priced, async checkpoint
runner = CliRunner()


def _json(*args: str) -> Any:
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    data.pop("slowlink", None)  # the version and the files read
    return data


@pytest.mark.parametrize(("cluster", "workload"), [(NFS, VIDEO), (REF, STORAGE)])
def test_plan_goodput_and_cost_answer_alike(cluster: str, workload: str) -> None:
    plan = _json("plan", cluster, workload, "--tokens", "1T")
    good = _json("goodput", cluster, workload, "--tokens", "1T")
    cost = _json("cost", cluster, workload, "--tokens", "1T")
    assert plan["goodput"] == good
    stall = plan["storage"]["data_stall_s"] or 0.0
    assert good["step_time_s"] == pytest.approx(plan["step_time_s"] + stall, rel=1e-5)
    for key in ("step_time_s", "ettr", "usd_per_million_tokens", "days", "run_usd", "tokens_per_s"):
        assert cost[key] == plan["cost"][key], key
    assert cost["step_time_s"] == good["step_time_s"] and cost["ettr"] == good["ettr"]
    assert cost["days"] == pytest.approx(good["time_to_train_days"], rel=1e-5)
    assert cost["data_stall_s"] == pytest.approx(stall, rel=1e-5)


def test_the_data_stall_is_priced_in_every_view() -> None:
    a = assess(load_workload(VIDEO), load_cluster(NFS), budget=Budget(tokens=1e12))
    assert a.data_stall_s > 0.4 and a.step_time_s == a.step.step_time_s + a.data_stall_s
    assert a.goodput is not None and a.goodput.step_s == a.step_time_s
    tc = a.token_cost
    assert tc is not None and tc.step_time_s == a.step_time_s and tc.ettr == a.goodput.ettr < 1.0
    assert a.bottleneck.startswith("storage: data stall")  # storage waits longer than any communication


def test_the_checkpoint_is_priced_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from slowlink.storage import checkpoint, plan

    calls: list[float] = []

    def counted(*args: Any) -> Any:
        calls.append(args[2])
        return checkpoint.checkpoint_cost(*args)

    monkeypatch.setattr(plan, "checkpoint_cost", counted)
    # full=False: the chain alone (advice re-runs the storage model for each change it checks)
    a = assess(load_workload(STORAGE), load_cluster(REF), budget=Budget(tokens=1e12), full=False)
    assert len(calls) == 1 and a.goodput is not None and a.storage.checkpoint is not None
    assert a.goodput.checkpoint.blocking_s == a.storage.checkpoint.blocking_s
    assert a.goodput.checkpoint.restore_s == a.storage.checkpoint.restore_s


@pytest.mark.parametrize(("cluster", "workload"), [(NFS, VIDEO), (REF, STORAGE), (REF, str(EX / "llama3-8b.yaml"))])
def test_one_checkpoint_interval_for_storage_and_failures(cluster: str, workload: str) -> None:
    """The workload's interval (counted in steps as they run, stall included) or Daly's where it gives none: the
    storage plan amortises its checkpoints over the interval the failure model uses."""
    a = assess(load_workload(workload), load_cluster(cluster), budget=Budget(tokens=1e12))
    ck = a.storage.checkpoint
    assert a.failures is not None and ck is not None and a.goodput is not None
    assert ck.interval_s == a.failures.interval_s == a.goodput.interval_s
    steps = max(1.0, a.failures.interval_s / a.step_time_s)  # the interval counts steps as they run
    stop = ck.write_s if ck.mode == "sync" else ck.blocking_s + max(0.0, ck.drain_s - a.failures.interval_s)
    assert a.storage.checkpoint_overhead_s == pytest.approx(stop / steps)


def test_what_cannot_be_priced_is_said_once_and_the_same_everywhere(tmp_path: Path) -> None:
    text = Path(REF).read_text()
    bare = tmp_path / "bare.yaml"  # no storage: the checkpoint and restore times are unknown
    bare.write_text(text[: text.index("\nstorage:")] + "\n")
    a = assess(load_workload(STORAGE), load_cluster(bare), budget=Budget(tokens=1e12))
    # the workload's data: and checkpoint: meet no storage: said once (issue 39), then what it leaves unpriced
    assert [u.part for u in a.unpriced] == ["storage", "failures"] and a.goodput is None and a.ettr == 1.0
    assert "the workload's data: and checkpoint: need the cluster's storage: section" in a.why("storage")
    why = a.why("failures")
    plan = _json("plan", str(bare), STORAGE, "--tokens", "1T")
    cost = _json("cost", str(bare), STORAGE, "--tokens", "1T")
    assert plan["goodput"] == {"unavailable": why}
    assert plan["unpriced"] == [{"part": "storage", "why": a.why("storage"), "rule": "storage_given"},
                                {"part": "failures", "why": why, "rule": "storage_given"}]
    assert cost["unpriced"] == plan["unpriced"] and cost["ettr"] == plan["cost"]["ettr"] == 1.0
    assert cost["ettr_basis"] == plan["cost"]["ettr_basis"] == f"before failures ({why})"
    assert cost["days"] == plan["cost"]["days"] == pytest.approx(1e12 / cost["tokens_per_s"] / 86400, rel=1e-4)
    res = runner.invoke(app, ["goodput", str(bare), STORAGE, "--tokens", "1T"])
    assert res.exit_code == 2 and why in " ".join(res.output.split()) and "Traceback" not in res.output
    words = runner.invoke(app, ["plan", str(bare), STORAGE, "--tokens", "1T"])
    assert " ".join(words.output.split()).count(why) == 1  # once, not again in the cost line


def test_no_budget_is_said_and_costs_are_still_priced() -> None:
    a = assess(load_workload(str(EX / "llama3-8b.yaml")), load_cluster(REF))
    assert [u.part for u in a.unpriced] == ["time_to_train"] and a.run_days is None
    assert a.failures is not None and a.token_cost is not None and a.ettr < 1.0  # ETTR needs no budget
    assert a.goodput is None  # days, GPU-hours and losses do


def test_an_unpriced_server_is_said_not_raised(tmp_path: Path) -> None:
    text = Path(REF).read_text().replace("gpu: h100-sxm", "gpu: mi300x")
    p = tmp_path / "mi300x.yaml"
    p.write_text(text)
    a = assess(load_workload(str(EX / "llama3-8b.yaml")), load_cluster(p), full=False)
    assert a.hardware is None and "no price for a server" in a.why("cost")
    assert _json("plan", str(p), str(EX / "llama3-8b.yaml"))["cost"] == {"unavailable": a.why("cost")}


def test_a_run_that_never_finishes_leaves_failures_unpriced_not_the_plan(tmp_path: Path) -> None:
    w = load_workload(str(EX / "llama3-8b-storage.yaml"))
    assert w.checkpoint is not None
    never = replace(w, checkpoint=replace(w.checkpoint, interval_steps=10**9))
    a = assess(never, load_cluster(REF), budget=Budget(tokens=1e12))
    assert a.failures is None and [(u.part, u.rule) for u in a.unpriced] == [("failures", "segment_completes")]
    assert a.step.step_time_s > 0 and a.token_cost is not None  # the step and its cost before failures stand
    path = tmp_path / "w.yaml"
    path.write_text(Path(STORAGE).read_text().replace("interval_steps: 100", "interval_steps: 1000000000"))
    res = runner.invoke(app, ["plan", REF, str(path)])
    assert res.exit_code == 0 and "failures: not priced: checkpoint interval" in " ".join(res.output.split())
    bad = runner.invoke(app, ["goodput", REF, str(path), "--tokens", "1T"])
    assert bad.exit_code == 2 and "almost never completes" in " ".join(bad.output.split())


def test_scale_is_the_chain_at_each_size() -> None:
    sizes = _json("scale", NFS, VIDEO, "--nodes", "4,8")["points"]
    cost = _json("cost", NFS, VIDEO)
    at_8 = next(p for p in sizes if p["nodes"] == 8)  # the file's own size
    assert at_8["ettr"] == cost["ettr"] and at_8["data_stall_s"] == cost["data_stall_s"] > 0
    assert at_8["tokens_per_s_per_gpu"] == pytest.approx(cost["tokens_per_s"] / 64, rel=1e-5)
    assert all({"ettr", "data_stall_s", "unpriced"} <= set(p) for p in sizes)


def test_an_infeasible_step_carries_its_rule() -> None:
    w = load_workload(str(EX / "llama3-70b.yaml"))
    big = replace(w.training, **{"micro_batch": 64, "global_batch": 64 * 64})
    with pytest.raises(InfeasiblePlan) as exc:
        assess(type(w)(**{**w.__dict__, "training": big}), load_cluster(REF))
    assert exc.value.rule == "memory_fits"


SPACE: dict[str, Any] = {
    "name": "chain", "workload": str(EX / "cost-llama3-70b.yaml"), "tokens": 1.0e12,
    "hardware": {"gpu": ["h100-sxm"], "nodes": [64, 128], "transport": ["infiniband", "roce"]},
    "parallel": {"tp": [8], "pp": [2, 4], "zero": [1]},
    "storage": {"system": "parallel-fs", "read_gbyte_s": 1, "write_gbyte_s": 60, "metadata_ops_s": 100000},
}
# 32 MB samples read from 1 GB/s: every design stalls on its data, so the stall is compared, not 0 == 0
VIDEO_DATA = ("data: {samples: 2000000, bytes_per_sample: 32MB, layout: files, format: raw, reader_workers_per_gpu: 4, "
              "decode_ms_per_sample: 20}\n")


def test_search_prices_what_cost_prices_on_its_emitted_files(tmp_path: Path) -> None:
    workload = tmp_path / "w.yaml"
    workload.write_text((EX / "cost-llama3-70b.yaml").read_text() + VIDEO_DATA)
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(SPACE | {"workload": str(workload)}))
    out = tmp_path / "best"
    res = runner.invoke(app, ["search", str(space), "--workers", "0", "--json", "--emit", str(out)])
    assert res.exit_code == 0, res.output
    best = json.loads(res.stdout)["best"]
    assert 0.5 < best["ettr"] < 1.0 and best["data_stall_s"] > 0
    cost = _json("cost", str(out / "cluster.yaml"), str(out / "workload.yaml"))
    for key in ("ettr", "usd_per_million_tokens", "days", "run_usd", "tokens_per_s", "step_time_s",
                "data_stall_s"):
        assert cost[key] == pytest.approx(best[key], rel=1e-5), key
    assert _json("goodput", str(out / "cluster.yaml"), str(out / "workload.yaml"))["ettr"] == cost["ettr"]
    assert json.loads(res.stdout)["basis"].endswith("x ETTR (failure model)")


def test_emit_refuses_a_file_before_searching(tmp_path: Path) -> None:
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(SPACE))
    f = tmp_path / "f"
    f.write_text("x")
    res = runner.invoke(app, ["search", str(space), "--workers", "0", "--emit", str(f)])
    assert res.exit_code == 2 and "--emit" in res.output and "is a file" in res.output
    assert "Traceback" not in res.output and f.read_text() == "x"
