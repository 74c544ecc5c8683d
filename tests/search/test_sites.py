"""A search across sites: designs split over sites with 1..n long-haul links, sync methods as layouts, ranked by
cost per token with the long haul's lease and optics in it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from slowlink.assess import Budget, assess
from slowlink.cli.main import app
from slowlink.cost.design import build_design
from slowlink.search.emit import emit
from slowlink.search.run import evaluate_space, summarize
from slowlink.search.space import load_space
from slowlink.spec.cluster import load_cluster
from slowlink.spec.workload import load_workload

EX = Path(__file__).resolve().parents[2] / "examples"
runner = CliRunner()
BASE = yaml.safe_load((EX / "search-two-site.yaml").read_text())


def _space(tmp_path: Path, **changes: Any) -> Path:
    data = {**BASE, "workload": str(EX / BASE["workload"]), **changes}
    p = tmp_path / "space.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_placements_and_syncs_multiply_the_space(tmp_path: Path) -> None:
    space = load_space(_space(tmp_path))
    # 2 node counts x (one site + 2 sites x 3 link counts); 2 tp x 4 syncs
    assert len(space.hardware) == 2 * 4 and len(space.layouts) == 2 * 4
    assert [(d.sites, d.dci_links) for d in space.hardware[:4]] == [(1, 0), (2, 1), (2, 2), (2, 4)]
    r = summarize(space, evaluate_space(space))
    # a one-site design runs the first sync only: 2 designs x 2 tp x 3 other syncs
    assert r.removed_by_rule["sync_needs_sites"] == 12
    # 16 nodes in one 8-node building, at tp 1 and tp 2 (tp 1 fits in memory since the gradient buffer is kept in the
    # dtype it is reduced in, bf16: 2 bytes per parameter, megatron-core)
    assert r.removed_by_rule["max_nodes_per_site"] == 2
    # each building a fabric of its own: one 8-node site is cheapest per token, two sites of 8 train twice as fast
    assert r.best is not None and space.design_of(r.best.index).sites == 1
    assert r.fastest is not None and space.design_of(r.fastest.index).sites == 2
    assert r.fastest.days < r.best.days / 1.9 and r.fastest in r.front


def test_a_point_is_the_chain_on_its_design(tmp_path: Path) -> None:
    space = load_space(_space(tmp_path))
    points = evaluate_space(space)
    p = next(x for x in points if not x.rule and space.design_of(x.index).sites == 2
             and space.layout(x.index % len(space.layouts)).sync.method == "hierarchical")  # type: ignore[union-attr]
    lay = space.layout(p.index % len(space.layouts))
    cluster = build_design(space.design_of(p.index), space.prices, space.shared)
    a = assess(space.workload_of(lay, p.dp), cluster, budget=Budget(tokens=space.tokens), prices=space.prices,
               full=False)
    assert a.cross_site is not None and a.cross_site.method == "hierarchical"
    assert a.token_cost is not None and a.token_cost.cost.dci is not None
    assert p.usd_per_million_tokens == a.token_cost.usd_per_million_tokens


def test_emit_writes_the_sites_and_the_sync(tmp_path: Path) -> None:
    space = load_space(_space(tmp_path))
    points = evaluate_space(space)
    best = summarize(space, points).fastest  # the two-site design
    assert best is not None
    out = emit(space, best, tmp_path / "best")
    cluster = load_cluster(out.cluster)
    assert cluster.sites is not None and len(cluster.sites.sites) == 2
    assert cluster.sites.interconnect.links == space.design_of(best.index).dci_links
    w = load_workload(out.workload)
    assert w.sync == space.layout(best.index % len(space.layouts)).sync


def test_uneven_split_is_a_rule(tmp_path: Path) -> None:
    space = load_space(_space(tmp_path, hardware={**BASE["hardware"], "nodes": [9]}))
    r = summarize(space, evaluate_space(space))
    assert r.removed_by_rule["sites_divide_nodes"] == 3 * 8  # 3 two-site placements x 8 layouts


def test_json_spells_out_the_placement_and_a_space_without_sites_keeps_its_keys(tmp_path: Path) -> None:
    res = runner.invoke(app, ["search", str(_space(tmp_path)), "--workers", "0", "--json"])
    assert res.exit_code == 0, res.output
    js = json.loads(res.output)
    assert js["best"]["sites"] == 1 and js["best"]["dci_links"] == 0 and js["best"]["sync"] == {"method": "ddp"}
    fastest = js["fastest"]
    assert fastest["sites"] == 2 and fastest["dci_links"] >= 1 and fastest["sync"]["method"]
    res = runner.invoke(app, ["search", str(_space(tmp_path, **{"sites": None, "sync": None})), "--workers", "0",
                              "--json"])
    assert res.exit_code == 0, res.output
    assert not {"sites", "dci_links", "sync"} & set(json.loads(res.output)["best"])


def test_bad_site_axes(tmp_path: Path, cli_fails: Callable[..., str]) -> None:
    def fails(path: Path, *needles: str) -> None:
        cli_fails(["search", str(path), "--workers", "0"], *needles)

    fails(_space(tmp_path, sites={**BASE["sites"], "count": []}), "sites.count", "at least one value")
    fails(_space(tmp_path, sites={**BASE["sites"], "links": [0]}), "sites.links.0 (0)", "greater than")
    fails(_space(tmp_path, sites={"count": [2]}), "sites.interconnect", "required")
    fails(_space(tmp_path, sync=[{"method": "diloco"}]), "sync.inner_steps: required")
    fails(_space(tmp_path, constraints={"max_nodes_per_site": 0}), "constraints.max_nodes_per_site (0)")


def test_the_csv_names_each_sync_option_in_words(tmp_path: Path) -> None:
    csv = tmp_path / "all.csv"
    res = runner.invoke(app, ["search", str(_space(tmp_path)), "--workers", "0", "--out", str(csv)])
    assert res.exit_code == 0, res.output
    text = csv.read_text()
    assert ",diloco H=100 int8," in text and ",streaming-diloco H=100 fp4 F=10," in text and "{" not in text
