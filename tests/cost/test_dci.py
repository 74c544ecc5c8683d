"""The long haul in the bill: optics at both ends of each link, the lease of the capacity, and the refusals where
either has no price."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slowlink.assess import assess
from slowlink.cli.main import app
from slowlink.cost.dci import HOURS_PER_MONTH, dci_bill
from slowlink.cost.model import cluster_cost
from slowlink.cost.prices import load_prices
from slowlink.errors import PriceMissing
from slowlink.spec.cluster import load_cluster
from slowlink.spec.sites import Site, Sites
from slowlink.spec.workload import load_workload

EX = Path(__file__).parents[2] / "examples"
TWO = load_cluster(EX / "two-site-1000km.yaml")
ONE = load_cluster(EX / "ref-64gpu.yaml")
PRICES = load_prices(None)


def _interconnect(**changes: object) -> Sites:
    assert TWO.sites is not None
    return replace(TWO.sites, interconnect=replace(TWO.sites.interconnect, **changes))


def test_two_sites_by_hand() -> None:
    # 2 links of 400 Gbit/s leaving each of 2 sites = 2 links; 4 ends of 400ZR at USD 6,000; 800 Gbit/s x USD 10
    assert TWO.sites is not None
    d = dci_bill(TWO.sites, PRICES)
    assert d.links == 2 and d.transceivers == 4 and d.capacity_gbit_s == 800
    assert d.optics_usd == 4 * PRICES.dci("400ZR").price_usd
    assert d.optics_power_w == 4 * PRICES.dci("400ZR").power_w
    assert d.lease_usd_per_month == 800 * 10
    assert d.lease_usd_per_hour == pytest.approx(8000 / 730.5)
    assert d.route_km == pytest.approx(1021, rel=1e-3)  # 5 ms one way at c / 1.4682
    assert any("past 400ZR's 120 km reach" in n for n in d.notes)


def test_three_sites_count_each_link_once() -> None:
    sites = _interconnect(links=1)
    three = Sites((Site("a", 2), Site("b", 3), Site("c", 3)), sites.interconnect)
    d = dci_bill(three, PRICES)
    assert d.links == 1.5 and d.transceivers == 3  # three link ends, each link joins two of them


def test_the_lease_and_the_optics_are_in_the_hourly_cost() -> None:
    with_haul = cluster_cost(TWO, PRICES)
    bare = cluster_cost(replace(TWO, sites=_interconnect(optics=None, price_usd_per_gbit_s_month=0.0)), PRICES)
    assert with_haul.dci is not None and bare.dci is not None
    assert with_haul.capex_usd["dci_optics"] == with_haul.dci.optics_usd and bare.capex_usd["dci_optics"] == 0
    assert with_haul.total_capex_usd - bare.total_capex_usd == pytest.approx(with_haul.dci.optics_usd)
    capex_h = with_haul.dci.optics_usd / (PRICES.facility.depreciation_years * 8766)
    power_h = with_haul.dci.optics_power_w * PRICES.facility.pue / 1e3 * PRICES.facility.usd_per_kwh
    lease_h = 8000 / HOURS_PER_MONTH
    assert with_haul.usd_per_hour - bare.usd_per_hour == pytest.approx(capex_h + power_h + lease_h)
    assert "dci" in with_haul.to_json() and "dci" not in cluster_cost(ONE, PRICES).to_json()


def test_each_site_is_billed_as_a_fabric_of_its_own_nodes() -> None:
    # two buildings share no switch: each site's 4 nodes on a leaf of their own, storage with the first site
    assert TWO.sites is not None
    cost = cluster_cost(TWO, PRICES)
    east = cluster_cost(replace(TWO, name="east", nodes=4, sites=None), PRICES)
    west = cluster_cost(replace(TWO, name="west", nodes=4, sites=None, storage=None), PRICES)
    assert cost.bom.switches == {"east leaf": 1, "east storage": 1, "west leaf": 1}
    assert cost.total_capex_usd == pytest.approx(east.total_capex_usd + west.total_capex_usd + 24000)
    assert cost.bom.nics == {"compute": 8, "storage": 8}


def test_no_named_optics_are_the_leases() -> None:
    d = dci_bill(_interconnect(optics=None), PRICES)
    assert d.transceivers == 0 and d.optics_usd == 0 and "a managed wavelength" in d.notes[0]


def test_a_lease_without_a_quote_is_refused_naming_the_field() -> None:
    cluster = replace(TWO, sites=_interconnect(price_usd_per_gbit_s_month=None))
    with pytest.raises(PriceMissing, match=r"interconnect.price_usd_per_gbit_s_month \(None\)"):
        cluster_cost(cluster, PRICES)
    partial = cluster_cost(cluster, PRICES, strict=False)
    assert partial.dci is None and "price_usd_per_gbit_s_month" in partial.excluded[0]
    a = assess(load_workload(EX / "llama3-8b.yaml"), cluster, full=False)
    assert a.token_cost is None and "price_usd_per_gbit_s_month" in a.why("cost")


def test_unpriced_optics_are_refused_naming_the_entry() -> None:
    with pytest.raises(PriceMissing, match=r"dci_optics.800ZR: no price .*priced: 400ZR, 400ZR\+"):
        dci_bill(_interconnect(optics="800ZR"), PRICES)


def test_a_quote_file_prices_other_optics(tmp_path: Path) -> None:
    quotes = tmp_path / "q.yaml"
    quotes.write_text("dci_optics:\n  800ZR: {price_usd: 9000, power_w: 28, reach_km: 120, source: a quote}\n")
    d = dci_bill(_interconnect(optics="800ZR"), load_prices(quotes))
    assert d.optics_usd == 4 * 9000 and d.optics_power_w == 4 * 28


def test_a_bad_optics_entry_exits_2_naming_the_field(tmp_path: Path) -> None:
    quotes = tmp_path / "q.yaml"
    quotes.write_text("dci_optics:\n  800ZR: {price_usd: -1, power_w: 28, reach_km: 120, source: a quote}\n")
    r = CliRunner().invoke(app, ["bom", str(EX / "two-site-1000km.yaml"), "--prices", str(quotes)])
    assert r.exit_code == 2 and "dci_optics.800ZR.price_usd" in r.output and "Traceback" not in r.output


def test_bom_and_cost_show_the_long_haul() -> None:
    r = CliRunner().invoke(app, ["cost", str(EX / "two-site-1000km.yaml"), str(EX / "llama3-8b.yaml")])
    assert r.exit_code == 0, r.output
    assert "dci_optics" in r.output and "8,000 USD/month" in r.output
    bom = CliRunner().invoke(app, ["bom", str(EX / "two-site-1000km.yaml")])
    assert bom.exit_code == 0 and "long-haul transceivers" in bom.output
    one = CliRunner().invoke(app, ["bom", str(EX / "ref-64gpu.yaml")])
    assert one.exit_code == 0 and "long haul" not in one.output
