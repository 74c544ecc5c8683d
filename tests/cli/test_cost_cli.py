"""CLI of the cost model: `bom` and `cost` contracts, and every bad input (exit 2, field, value and rule named,
no traceback)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from typer.testing import CliRunner

from slowlink.cli.main import app

EX = Path(__file__).parents[2] / "examples"
SUPERPOD = str(EX / "cost-superpod-1su.yaml")
REF = str(EX / "ref-64gpu.yaml")
LLAMA = str(EX / "llama3-8b.yaml")
runner = CliRunner()


def _file(tmp_path: Path, src: str, old: str, new: str) -> str:
    text = Path(src).read_text()
    assert old in text, old
    p = tmp_path / Path(src).name
    p.write_text(text.replace(old, new, 1))
    return str(p)


def test_bom_json_contract_and_superpod_counts() -> None:
    res = runner.invoke(app, ["bom", SUPERPOD, "--json"])
    assert res.exit_code == 0, res.output
    js = json.loads(res.output)
    assert {"switches", "links", "transceivers", "power_w", "capex_usd", "network_share"} <= set(js)
    assert js["switches"] == {"leaf": 8, "spine": 4}
    assert js["links"] == {"node_leaf": 252, "leaf_spine": 256}
    assert js["transceivers"] == {"400G-SR4": 2 * (252 + 256)}
    assert 0 < js["network_share"] < 1


def test_bom_table_names_the_network_share() -> None:
    res = runner.invoke(app, ["bom", SUPERPOD])
    assert res.exit_code == 0, res.output
    assert "of capex" in res.output and "spine switches" in res.output


def test_cost_json_contract() -> None:
    res = runner.invoke(app, ["cost", REF, LLAMA, "--json"])
    assert res.exit_code == 0, res.output
    js = json.loads(res.output)
    assert js["usd_per_gpu_hour"] > 0 and js["usd_per_million_tokens"] > 0
    # the failure model's ETTR multiplies in (64 GPUs: MTTF of weeks, so a fraction of a percent)
    assert 0.99 < js["ettr"] < 1 and f"x ETTR {js['ettr']:g}" in js["basis"] and "MTTF" in js["ettr_basis"]
    # $/M tokens = $/h / (tokens/s x ETTR x 3600) x 1e6
    assert abs(js["usd_per_million_tokens"] - js["usd_per_hour"] / (js["tokens_per_s"] * js["ettr"] * 3600) * 1e6) \
        < 1e-3 * js["usd_per_million_tokens"]


def test_user_quotes_replace_bundled_prices(tmp_path: Path) -> None:
    quotes = tmp_path / "q.yaml"
    quotes.write_text("switches:\n  - {name: my-ndr, transport: infiniband, speed_gbit_s: 400, radix: 64,\n"
                      "     price_usd: 1, power_w: 1, source: my quote}\n")
    base = json.loads(runner.invoke(app, ["bom", SUPERPOD, "--json"]).output)
    mine = json.loads(runner.invoke(app, ["bom", SUPERPOD, "--json", "--prices", str(quotes)]).output)
    assert mine["capex_breakdown_usd"]["switches"] == 12
    assert mine["capex_usd"] < base["capex_usd"]


def test_bad_prices_file(tmp_path: Path, cli_fails: Callable[..., str]) -> None:
    p = tmp_path / "q.yaml"
    p.write_text("nics:\n  - {speed_gbit_s: 400, price_usd: -5, source: x}\n")
    cli_fails(["bom", SUPERPOD, "--prices", str(p)], "nics.0.price_usd (-5)", "greater than 0")
    p.write_text("nics:\n  - {speed_gbit_s: 400, price_usd: 5}\n")
    cli_fails(["bom", SUPERPOD, "--prices", str(p)], "nics.0.source: required key is missing")
    p.write_text("switchez: []\n")
    cli_fails(["bom", SUPERPOD, "--prices", str(p)], "switchez: unknown key", "docs/cost.md")
    cli_fails(["bom", SUPERPOD, "--prices", str(tmp_path / "none.yaml")], "does not exist")


def test_unpriced_parts_leave_a_partial_bill_that_names_them(tmp_path: Path) -> None:
    """bom and cost stopped at the first part without a price (issue 39): they price what they can, name every
    part they cannot, and give totals that say they exclude them."""
    radix = _file(tmp_path, SUPERPOD, "switch_radix: 64", "switch_radix: 48")
    res = runner.invoke(app, ["bom", radix])
    assert res.exit_code == 0, res.output
    assert "excluding (no price): prices: switches: no infiniband switch of 48 ports at 400 Gbit/s" in res.stdout
    assert "USD per GPU-hour" in res.stdout and "excluding the parts above" in res.stdout
    gpu = _file(tmp_path, SUPERPOD, "gpu: h100-sxm", "gpu: mi300x")
    res = runner.invoke(app, ["bom", gpu, "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert len(d["excluded"]) == 1 and "servers.mi300x: no price" in d["excluded"][0]
    assert d["capex_breakdown_usd"]["servers"] == 0 and d["capex_breakdown_usd"]["switches"] > 0
    full = json.loads(runner.invoke(app, ["bom", SUPERPOD, "--json"]).stdout)
    assert "excluded" not in full  # a complete bill is as before
    assert d["capex_breakdown_usd"]["switches"] == full["capex_breakdown_usd"]["switches"]  # same fabric


def test_management_ports_that_do_not_fit(tmp_path: Path, cli_fails: Callable[..., str]) -> None:
    full = _file(tmp_path, SUPERPOD, "nodes: 31", "nodes: 32")
    cli_fails(["bom", full], "fabric.management_ports (4) must fit the 0 free leaf ports")
    neg = _file(tmp_path, SUPERPOD, "management_ports: 4", "management_ports: -1")
    cli_fails(["bom", neg], "fabric.management_ports (-1)", "greater than or equal to 0")


def test_cost_of_an_infeasible_plan(tmp_path: Path, cli_fails: Callable[..., str]) -> None:
    bad = _file(tmp_path, LLAMA, "tp: 2", "tp: 3")
    cli_fails(["cost", REF, bad], "parallel")
    cli_fails(["cost", LLAMA, REF], "this looks like a workload file")


def test_cost_of_a_token_budget(tmp_path: Path, cli_fails: Callable[..., str]) -> None:
    res = runner.invoke(app, ["cost", REF, LLAMA, "--json", "--tokens", "1e12"])
    assert res.exit_code == 0, res.output
    js = json.loads(res.output)
    assert abs(js["run_usd"] - js["usd_per_million_tokens"] * 1e6) < 1e-3 * js["run_usd"]
    assert abs(js["days"] - 1e12 / (js["tokens_per_s"] * js["ettr"]) / 86400) < 1e-3 * js["days"]
    cli_fails(["cost", REF, LLAMA, "--tokens", "-3"], "--tokens ('-3') must be")
    cli_fails(["cost", REF, LLAMA, "--tokens", "nan"], "--tokens ('nan')")


def test_reference_network_share_table(cli_fails: Callable[..., str]) -> None:
    res = runner.invoke(app, ["bom", "--reference", "--json"])
    assert res.exit_code == 0, res.output
    rows = {(r["fabric"], r["gpus"]): r for r in json.loads(res.output)}
    assert len(rows) == 9 and rows[("IB NDR fat tree 1:1", 8192)]["switches"] == {"leaf": 256, "spine": 256,
                                                                                   "core": 128}
    assert "network share" in runner.invoke(app, ["bom", "--reference"]).output
    cli_fails(["bom"], "give a CLUSTER.yaml or --reference")
    cli_fails(["bom", SUPERPOD, "--reference"], "not both")


def test_cost_of_a_cluster_with_an_unpriced_server_excludes_it(tmp_path: Path) -> None:
    """An MI300X cluster (no server price in the book) still gets its network bill and a cost per token that says
    what it excludes; the chain names the exclusion once (unpriced: cost)."""
    lab = _file(tmp_path, REF, "gpu: h100-sxm", "gpu: a100-80gb")
    lab = _file(tmp_path, lab, "link: nvlink4", "link: nvlink3")
    res = runner.invoke(app, ["cost", lab, LLAMA, "--json", "--tokens", "1T"])
    assert res.exit_code == 0, res.output
    priced = json.loads(res.stdout)
    assert "excluded" not in priced and priced["unpriced"] == []  # an A100-80GB server has a price
    res = runner.invoke(app, ["cost", lab, LLAMA, "--json", "--tokens", "1T", "--set", "cluster.gpu=mi300x",
                              "--set", "cluster.scale_up.link=xgmi"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert "servers.mi300x: no price" in d["excluded"][0]
    assert [u["part"] for u in d["unpriced"]] == ["cost"] and "exclude it" in d["unpriced"][0]["why"]
    assert 0 < d["usd_per_million_tokens"] < priced["usd_per_million_tokens"] / 5  # the servers are left out
