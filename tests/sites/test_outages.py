"""Outages across sites: a lost long-haul link, a site cut off and a site down, priced per sync method."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slowlink import units
from slowlink.assess import assess
from slowlink.cli.main import app
from slowlink.sites.outages import Recovery, parallel_links_rate_per_s, site_outages
from slowlink.sites.plan import cross_site, with_cross_site
from slowlink.spec.cluster import Cluster, load_cluster
from slowlink.spec.workload import Sync, load_workload
from slowlink.workload.step import plan

EX = Path(__file__).parents[2] / "examples"
TWO = load_cluster(EX / "two-site-1000km.yaml")
LLAMA = load_workload(EX / "llama3-8b.yaml")
REC = Recovery(detect_s=34.4, restart_s=100.0, restore_s=50.0, interval_s=3000.0)
H = units.HOUR


def _with_outages(links: int = 2) -> Cluster:
    assert TWO.sites is not None
    ic = replace(TWO.sites.interconnect, links=links, link_mtbf_s=2000 * H, link_repair_s=12 * H)
    sites = tuple(replace(s, mtbf_s=4380 * H, repair_s=4 * H) for s in TWO.sites.sites)
    return replace(TWO, sites=replace(TWO.sites, sites=sites, interconnect=ic))


def _outages(sync: Sync, cluster: Cluster) -> dict[str, object]:
    w = replace(LLAMA, sync=sync)
    alone = plan(w, cluster)
    cross = cross_site(w, cluster, alone)
    assert cross is not None
    out = site_outages(w, cluster, with_cross_site(alone, cross), alone, cross, REC)
    assert out is not None
    return {o.what: o for o in out.outages} | {"ettr": out.ettr, "cross": cross}


def test_two_parallel_links_down_at_once_by_hand() -> None:
    # L l^L r^(L-1): 2 x (1 / 2000 h)^2 x 12 h per hour
    rate = parallel_links_rate_per_s(2, 1 / (2000 * H), 12 * H)
    assert rate * H == pytest.approx(2 * (1 / 2000) ** 2 * 12)
    assert parallel_links_rate_per_s(1, 1 / (2000 * H), 12 * H) == pytest.approx(1 / (2000 * H))


def test_a_synchronous_job_stops_for_a_cut_and_a_site() -> None:
    o = _outages(Sync("ddp"), _with_outages())
    cut = o["a site cut off (all its links down)"]
    assert cut.length_s == 6 * H  # two links' overlap: r / 2
    assert cut.lost_s == pytest.approx(34.4 + 6 * H + 100 + 50 + 1500)
    down = o["site east down"]
    assert down.rate_per_s == pytest.approx(1 / (4380 * H))
    assert down.lost_s == pytest.approx(34.4 + 4 * H + 100 + 50 + 1500)


def test_diloco_trains_on_through_a_cut_and_loses_only_the_lost_sites_share() -> None:
    sync = Sync("diloco", 100, outer_dtype="int8")
    o = _outages(sync, _with_outages())
    cross = o["cross"]
    assert o["a site cut off (all its links down)"].lost_s == pytest.approx(cross.sync_s)  # type: ignore[attr-defined]
    assert o["site west down"].lost_s == pytest.approx(0.5 * (4 * H + 100 + 50))
    assert o["ettr"] > _outages(Sync("ddp"), _with_outages())["ettr"]


def test_one_link_per_site_has_no_spare_link() -> None:
    o = _outages(Sync("ddp"), _with_outages(links=1))
    assert "one long-haul link" not in o
    assert o["a site cut off (all its links down)"].rate_per_s == pytest.approx(1 / (2000 * H))


def test_a_lost_link_slows_a_line_bound_sync() -> None:
    # hierarchical at 10 ms over 2 x 400G: the long haul is the bound, so one link short the step is slower
    o = _outages(Sync("hierarchical"), _with_outages())
    link = o["one long-haul link"]
    assert link.rate_per_s == pytest.approx(2 / (2000 * H))  # 2 links, each counted once
    assert 0 < link.lost_s < 12 * H


def test_without_rates_nothing_is_priced_and_it_says_so() -> None:
    a = assess(LLAMA, TWO, full=False)
    assert a.outages is not None and a.outages.outages == () and a.outages.ettr == 1.0
    assert any("link_mtbf_hours" in u for u in a.outages.unpriced)
    assert a.failures is not None and a.ettr == a.failures.ettr


def test_the_chain_multiplies_the_outages_into_the_ettr() -> None:
    a = assess(LLAMA, _with_outages(), full=False)
    assert a.failures is not None and a.outages is not None and a.outages.ettr < 1
    assert a.ettr == pytest.approx(a.failures.ettr * a.outages.ettr)
    assert "for the sites' outages" in a.ettr_basis
    js = a.to_json()
    assert js["site_outages"]["method"] == "ddp"  # type: ignore[index]
    one = assess(LLAMA, replace(TWO, sites=None), full=False)
    assert "site_outages" not in one.to_json()


@pytest.mark.parametrize(("text", "field"), [
    ("  link_mtbf_hours: 2000\n", "interconnect.link_mtbf_hours given without interconnect.link_repair_hours"),
    ("  link_repair_hours: 12\n", "interconnect.link_repair_hours given without interconnect.link_mtbf_hours"),
])
def test_a_rate_without_its_length_exits_2(tmp_path: Path, text: str, field: str) -> None:
    p = tmp_path / "c.yaml"
    p.write_text((EX / "two-site-1000km.yaml").read_text() + text)
    r = CliRunner().invoke(app, ["plan", str(p), str(EX / "llama3-8b.yaml")])
    assert r.exit_code == 2 and field in r.output and "Traceback" not in r.output


def test_a_site_outage_without_its_length_exits_2(tmp_path: Path) -> None:
    p = tmp_path / "c.yaml"
    p.write_text((EX / "two-site-1000km.yaml").read_text().replace("{name: east, nodes: 4}",
                                                                     "{name: east, nodes: 4, mtbf_hours: 100}"))
    r = CliRunner().invoke(app, ["plan", str(p), str(EX / "llama3-8b.yaml"), "--json"])
    assert r.exit_code == 2 and "sites.east.mtbf_hours given without sites.east.repair_hours" in r.output
    bad = tmp_path / "d.yaml"
    bad.write_text((EX / "two-site-1000km.yaml").read_text().replace("{name: east, nodes: 4}",
                                                                       "{name: east, nodes: 4, mtbf_hours: 0}"))
    r = CliRunner().invoke(app, ["plan", str(bad), str(EX / "llama3-8b.yaml")])
    assert r.exit_code == 2 and "mtbf_hours" in r.output and "greater than 0" in r.output


def test_plan_json_lists_the_outages(tmp_path: Path) -> None:
    p = tmp_path / "c.yaml"
    p.write_text((EX / "two-site-1000km.yaml").read_text() + "  link_mtbf_hours: 2000\n  link_repair_hours: 12\n")
    r = CliRunner().invoke(app, ["plan", str(p), str(EX / "llama3-8b.yaml"), "--json"])
    assert r.exit_code == 0, r.output
    js = json.loads(r.output)
    out = js[0]["site_outages"] if isinstance(js, list) else js["site_outages"]
    assert {o["what"] for o in out["outages"]} == {"one long-haul link", "a site cut off (all its links down)"}


def test_goodput_and_cost_price_the_same_outages() -> None:
    from slowlink.assess import Budget

    a = assess(LLAMA, _with_outages(), budget=Budget(tokens=1e12), full=False)
    g = a.goodput
    assert g is not None and a.outages is not None and a.run_days is not None
    assert g.ettr == pytest.approx(a.ettr) and g.wall_s / units.DAY == pytest.approx(a.run_days)
    losses = g.losses_days()
    assert losses["site_outages"] == pytest.approx(g.wall_s * (1 - a.outages.ettr) / units.DAY)
    steps_own = ("data_stall", "bubble", "exposed_communication")
    lost = sum(v for k, v in losses.items() if k not in steps_own)
    assert lost == pytest.approx((g.wall_s - g.steps * g.step_s) / units.DAY, rel=1e-3)
    one = assess(LLAMA, replace(TWO, sites=None), budget=Budget(tokens=1e12), full=False).goodput
    assert one is not None and "site_outages" not in one.losses_days()
