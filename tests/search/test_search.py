"""Design search: the space's size, the rules that remove configurations, the Pareto front, the constraints,
and the same result on a Dask LocalCluster of 1 and 2 workers as in-process."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from slowlink.cli.main import app
from slowlink.errors import SpecError
from slowlink.report.search import search_json
from slowlink.search.evaluate import Point
from slowlink.search.run import evaluate_space, pareto, summarize
from slowlink.search.space import load_space

EX = Path(__file__).resolve().parents[2] / "examples"
runner = CliRunner()
SMALL: dict[str, Any] = {
    "name": "small", "workload": str(EX / "cost-llama3-70b.yaml"), "tokens": 1.0e12,
    "hardware": {"gpu": ["h100-sxm"], "nodes": [64, 128], "transport": ["infiniband", "roce"]},
    "parallel": {"tp": [4, 8], "pp": [1, 2, 4], "zero": [1, 2]},
    "constraints": {"deadline_days": 40.0},
}


def _space(tmp_path: Path, **changes: Any) -> Path:
    data = {**SMALL, **changes}
    p = tmp_path / "space.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_every_configuration_is_counted_once(tmp_path: Path) -> None:
    space = load_space(_space(tmp_path))
    assert space.size == 2 * 2 * 2 * 3 * 2
    r = summarize(space, evaluate_space(space))
    assert [p.index for p in r.points] == list(range(space.size))
    assert len(r.feasible) + sum(r.removed_by_rule.values()) == space.size
    # tp 4, pp 1, zero 1 keeps a quarter of a 70B model's weights and bf16 gradient buffer (Megatron-Core's, in the
    # dtype it reduces in: 2 x 2 x 17.6e9 params = 65.7 GiB) beside 42 GiB of activations: 2 designs x 2 transports;
    # at zero 2 on 64 nodes, the logits and loss of one micro-batch (8192 x 128256 / 4 at 6 bytes) tip it over
    # (80.0 GiB of 79.6): 2 more. tp 4, pp 2, zero 1 (78.3 GiB: 16.4 of gradients at 2 bytes) fits.
    assert r.removed_by_rule == {"memory_fits": 6}
    assert r.best is not None and r.best in r.feasible
    assert r.best.usd_per_million_tokens == min(p.usd_per_million_tokens for p in r.feasible)


def test_constraints_remove_and_are_priced(tmp_path: Path) -> None:
    space = load_space(_space(tmp_path, constraints={"deadline_days": 15.0, "budget_usd": 1e9}))
    r = summarize(space, evaluate_space(space))
    assert r.removed_by_rule["deadline_days"] > 0
    assert all(p.days <= 15.0 for p in r.feasible)
    with_, without = (r.constraint_cost["deadline_days"][k] for k in ("usd_per_million_tokens_with",
                                                                      "usd_per_million_tokens_without"))
    assert with_ is not None and without is not None and with_ >= without


def test_pareto_keeps_only_undominated_points() -> None:
    pts = [Point(0, days=10, run_usd=5), Point(1, days=5, run_usd=9), Point(2, days=7, run_usd=9),
           Point(3, days=12, run_usd=4), Point(4, days=10, run_usd=6)]
    assert [p.index for p in pareto(pts)] == [1, 0, 3]


def test_empty_space_says_which_rule_removed_what(tmp_path: Path) -> None:
    res = runner.invoke(app, ["search", str(_space(tmp_path, parallel={"tp": [3]})), "--workers", "0"])
    assert res.exit_code == 2, res.output
    assert "none of the 4 configurations is feasible: parallel_divides removed 4" in res.output
    tight = _space(tmp_path, constraints={"budget_usd": 1000.0})
    res = runner.invoke(app, ["search", str(tight), "--workers", "0"])
    assert res.exit_code == 2 and "budget_usd removed 42, memory_fits removed 6" in res.output


def test_search_json_contract_and_outputs(tmp_path: Path) -> None:
    csv, png = tmp_path / "all.csv", tmp_path / "front.png"
    res = runner.invoke(app, ["search", str(_space(tmp_path)), "--workers", "0", "--json", "--out", str(csv),
                              "--plot", str(png)])
    assert res.exit_code == 0, res.output
    js = json.loads(res.output)
    assert {"evaluated", "feasible", "pareto", "best", "removed_by_rule"} <= set(js)
    assert js["evaluated"] == 48 and js["pareto"] and js["best"]["usd_per_million_tokens"] > 0
    assert js["fastest"]["days"] == min(p["days"] for p in js["pareto"]) == js["pareto"][0]["days"]
    assert len(csv.read_text().splitlines()) == 49 and png.stat().st_size > 0


def test_bad_search_files(tmp_path: Path, cli_fails: Callable[..., str]) -> None:
    def fails(path: Path, *needles: str, args: tuple[str, ...] = ()) -> None:
        cli_fails(["search", str(path), "--workers", "0", *args], *needles)

    fails(_space(tmp_path, hardware={"gpu": ["h100-sxm"], "nodes": []}), "hardware.nodes", "at least one value")
    fails(_space(tmp_path, hardware={"gpu": ["h100-sxm"], "nodes": [0]}), "hardware.nodes.0 (0)", "greater than")
    fails(_space(tmp_path, tokens=-1.0), "tokens (-1.0)", "greater than 0")
    fails(_space(tmp_path, colour="red"), "colour: unknown key", "docs/cost.md")
    fails(_space(tmp_path, workload="missing.yaml"), "does not exist")
    fails(_space(tmp_path, parallel={"zero": [4]}), "parallel.zero.0 (4)")
    fails(_space(tmp_path), "--workers (-1) must be >= 0", args=("--workers", "-1"))
    fails(_space(tmp_path), "--out", "must end in .csv, .parquet", args=("--out", str(tmp_path / "x.txt")))
    (tmp_path / "afile").write_text("x")
    fails(_space(tmp_path), "--resume ('", "is a file: give a folder", args=("--resume", str(tmp_path / "afile")))


@pytest.mark.slow
def test_same_result_on_one_and_two_dask_workers(tmp_path: Path) -> None:
    space = load_space(_space(tmp_path))
    from dask.distributed import LocalCluster

    local = search_json(summarize(space, evaluate_space(space)))
    one = search_json(summarize(space, evaluate_space(space, workers=1)))
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster:  # --scheduler ADDR
        two = search_json(summarize(space, evaluate_space(space, scheduler=cluster.scheduler_address)))
    assert local == one == two


def test_memoised_collective_prices_change_nothing(tmp_path: Path) -> None:
    from dataclasses import replace as dc_replace

    from slowlink.cost.design import build_design
    from slowlink.search.evaluate import memo_cost
    from slowlink.workload.comm import analytical_cost
    from slowlink.workload.step import plan

    space = load_space(_space(tmp_path))
    cluster = build_design(space.hardware[0], space.prices)
    memo = memo_cost(cluster)
    for tp, pp, mb in ((8, 2, 1), (8, 2, 2), (4, 4, 1), (8, 2, 1)):
        w = space.workload
        work = dc_replace(w, parallel=dc_replace(w.parallel, **{"tp": tp, "pp": pp, "vp": 1,
                                                                    "dp": cluster.gpus // (tp * pp)}),
                          training=dc_replace(w.training, **{"micro_batch": mb}))
        assert plan(work, cluster, memo) == plan(work, cluster, analytical_cost(cluster))


def test_resume_skips_kept_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import slowlink.search.run as run

    space = load_space(_space(tmp_path))
    folder = tmp_path / "kept"
    first = search_json(summarize(space, evaluate_space(space, resume=folder)))
    calls: list[list[int]] = []
    real = run.evaluate_hardware
    monkeypatch.setattr(run, "evaluate_hardware", lambda s, part: calls.append(part) or real(s, part))
    assert search_json(summarize(space, evaluate_space(space, resume=folder))) == first and calls == []
    for f in folder.glob("chunk-*.json"):  # an interrupted run: nothing kept, all evaluated again
        f.unlink()
    assert search_json(summarize(space, evaluate_space(space, resume=folder))) == first and calls
    other = load_space(_space(tmp_path, tokens=2.0e12))
    with pytest.raises(SpecError, match="holds chunks of another search space"):
        evaluate_space(other, resume=folder)


def test_resume_refuses_chunks_of_the_same_space_priced_without_its_storage(tmp_path: Path) -> None:
    from slowlink.search.store import ChunkStore

    bare = load_space(_space(tmp_path))
    folder = tmp_path / "chunks"
    ChunkStore(folder, bare, [[0]])
    with_storage = load_space(_space(tmp_path, storage={"system": "nfs", "read_gbyte_s": 10, "write_gbyte_s": 5,
                                                        "metadata_ops_s": 10000}))
    with pytest.raises(SpecError, match="another search space"):
        ChunkStore(folder, with_storage, [[0]])
