"""``slowlink cost --html`` and ``slowlink bom --html``: the capex figure with the network's share, switches per
tier, the bill of materials, $/GPU-hour and $/M tokens on the page (well-formedness fixture in conftest.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from slowlink.assess import Budget, assess
from slowlink.cli.main import app
from slowlink.cost.model import TokenCost, cluster_cost
from slowlink.cost.prices import load_prices
from slowlink.spec.cluster import load_cluster
from slowlink.spec.workload import load_workload

pytest.importorskip("matplotlib")
EX = Path(__file__).resolve().parents[2] / "examples"
SUPERPOD, REF, WORKLOAD = str(EX / "cost-superpod-1su.yaml"), str(EX / "ref-64gpu.yaml"), str(EX / "llama3-8b.yaml")
runner = CliRunner()


def _run(tmp_path: Path, *args: str) -> tuple[Path, dict[str, Any]]:
    out = tmp_path / "page.html"
    res = runner.invoke(app, [*args, "--json", "--html", str(out)])
    assert res.exit_code == 0, res.output
    return out, json.loads(res.stdout)


def test_switch_capex_by_tier_adds_up_to_the_switches() -> None:
    for path in (SUPERPOD, REF):  # the reference cluster has a separate storage fabric at its own line rate
        cost = cluster_cost(load_cluster(path), load_prices(None))
        assert set(cost.switch_usd) == {t for t, n in cost.bom.switches.items() if n}
        assert sum(cost.switch_usd.values()) == pytest.approx(cost.capex_usd["switches"])


def test_bom_page_has_capex_figure_share_and_bill_of_materials(tmp_path: Path, parse_page: Callable[..., Any]
                                                               ) -> None:
    out, _ = _run(tmp_path, "bom", SUPERPOD)
    assert parse_page(out).figures == {"capex": 1}
    text = out.read_text()
    cost = cluster_cost(load_cluster(SUPERPOD), load_prices(None))  # the JSON's numbers are rounded
    assert f"network: {cost.network_capex_usd:,.0f} USD = {cost.network_share:.1%} of" in text  # the figure
    assert f"{cost.usd_per_gpu_hour:.3f} USD per GPU-hour" in text
    figure = text.split('id="capex"')[1].split("</figure>")[0]
    for tier, n in cost.bom.switches.items():  # bill of materials rows, and each tier a bar of its own
        assert f"<td class=\"w\">{tier} switches</td><td>{n:,}</td>" in text
        assert f">{tier} switches<" in figure and f"{cost.switch_usd[tier]:,.0f} USD" in figure
    assert f"<td>{sum(cost.bom.transceivers.values()):,}</td>" in text
    for part, usd in cost.capex_usd.items():
        assert f"<td class=\"w\">{part}</td><td>{usd:,.0f}</td>" in text
    assert "superpod-h100-1su" in text and "31 x 8 h100-sxm = 248" in text  # the inputs
    assert "USD per million tokens" not in text  # no workload: no token cost


def test_cost_page_adds_the_token_cost_and_the_run(tmp_path: Path, parse_page: Callable[..., Any]) -> None:
    out, data = _run(tmp_path, "cost", REF, WORKLOAD, "--tokens", "1e12")
    assert parse_page(out).figures == {"capex": 1}
    text = out.read_text()
    a = assess(load_workload(WORKLOAD), load_cluster(REF), budget=Budget(tokens=1e12), full=False)
    step, ettr = a.step, a.ettr
    tc = TokenCost(cluster_cost(load_cluster(REF), load_prices(None)), a.tokens_per_s, a.step_time_s, ettr)
    assert f"{tc.usd_per_million_tokens:.4f} USD per million tokens" in text
    assert f"<td>{tc.usd_per_million_tokens:.4f}</td>" in text and f"<td>{tc.cost.usd_per_gpu_hour:.3f}</td>" in text
    assert f"<td>{tc.cost.network_share:.1%}</td>" in text and f"{tc.tokens_per_s:,.0f}" in text
    assert f"{a.run_days:.1f} days, {a.run_usd:,.0f} USD" in text and f"<td>{ettr:.4f}</td>" in text
    assert data["bottleneck"] == step.bottleneck and step.bottleneck in text
    assert "llama3-8b" in text and "tp 2, pp 1" in text  # the inputs
    assert ">storage switches<" in text  # a separate storage fabric is its own tier


def test_bom_reference_has_no_page(tmp_path: Path) -> None:
    res = runner.invoke(app, ["bom", "--reference", "--html", str(tmp_path / "x.html")])
    assert res.exit_code == 2 and "give a CLUSTER.yaml" in res.output and "Traceback" not in res.output
    assert list(tmp_path.iterdir()) == []
