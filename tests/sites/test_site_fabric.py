"""A site's own fabric: the step is the slowest site's (each site's fabric prices the job's in-site communication),
the plan names it, and the bill prices each site on its fabric."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slowlink.assess import assess
from slowlink.cli.main import app
from slowlink.cost.model import cluster_cost
from slowlink.cost.prices import load_prices
from slowlink.sites.plan import fabric_variants
from slowlink.spec.cluster import cluster_from_mapping, load_cluster
from slowlink.spec.workload import load_workload
from slowlink.workload.step import plan

EX = Path(__file__).parents[2] / "examples"
LLAMA = load_workload(EX / "llama3-8b.yaml")
SLOW_FABRIC = {"transport": "ethernet", "topology": "fat-tree", "tiers": 2, "oversubscription": 4}


def _two(tmp_path: Path, fabric: dict[str, object] | None = SLOW_FABRIC) -> Path:
    text = (EX / "two-site-1000km.yaml").read_text()
    if fabric is not None:
        text = text.replace("  - {name: west, nodes: 4}", "  - name: west\n    nodes: 4\n    fabric: "
                            + json.dumps(fabric))
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return p


def test_the_slowest_sites_fabric_sets_the_step(tmp_path: Path) -> None:
    c = load_cluster(_two(tmp_path))
    assert [name for name, _ in c.site_fabrics] == ["west"] and c.site_fabrics[0][1].transport.kind == "ethernet"
    variants = dict(fabric_variants(c))
    assert set(variants) == {"east", "west"} and variants["west"].sites is None
    west, east = plan(LLAMA, variants["west"]), plan(LLAMA, variants["east"])
    assert west.step_time_s > east.step_time_s  # plain Ethernet 4:1 behind the same 400G NICs
    a = assess(LLAMA, c, full=False)
    assert a.cross_site is not None and a.cross_site.paced_by == "west"
    assert a.step.step_time_s == pytest.approx(west.step_time_s + a.cross_site.exposed_s)
    assert a.to_json()["cross_site"]["paced_by"] == "west"  # type: ignore[index]


def test_without_own_fabrics_nothing_changes(tmp_path: Path) -> None:
    c = load_cluster(_two(tmp_path, None))
    assert c.site_fabrics == () and [n for n, _ in fabric_variants(c)] == ["east + west"]
    a = assess(LLAMA, c, full=False)
    assert a.cross_site is not None and a.cross_site.paced_by is None
    assert "paced_by" not in a.cross_site.to_json()


def test_the_bill_prices_each_site_on_its_own_fabric(tmp_path: Path) -> None:
    prices = load_prices(None)
    cost = cluster_cost(load_cluster(_two(tmp_path)), prices)
    ib, eth = prices.switch("infiniband", 400, 64), prices.switch("ethernet", 400, 64)
    assert cost.switch_usd["east leaf"] == ib.price_usd and cost.switch_usd["west leaf"] == eth.price_usd
    assert cost.bom.topology == "east: fat-tree, west: fat-tree" and cost.complete
    a = assess(LLAMA, load_cluster(_two(tmp_path)), full=False)
    assert a.token_cost is not None  # priced, the long haul and both fabrics in it


def test_a_bad_site_fabric_exits_2_naming_the_field(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["plan", str(_two(tmp_path, {"transport": "carrier-pigeon"})),
                                 str(EX / "llama3-8b.yaml")])
    assert r.exit_code == 2 and "sites.1.fabric.transport" in r.output and "Traceback" not in r.output
    data = {"name": "x", "nodes": 2, "gpus_per_node": 8, "gpu": "h100-sxm",
            "scale_up": {"link": "nvlink4", "domain_gpus": 8}, "nics": {"compute": {"per_node": 1,
                                                                                    "speed_gbit_s": 400}},
            "fabric": {"transport": "infiniband"},
            "sites": [{"name": "a", "nodes": 1, "fabric": {"transport": "roce", "oversubscription": 0.5}},
                      {"name": "b", "nodes": 1}],
            "interconnect": {"links": 1, "speed_gbit_s": 100, "rtt_ms": 1}}
    with pytest.raises(Exception, match=r"sites.0.fabric.oversubscription"):
        cluster_from_mapping(data)
