"""``slowlink search --html``: the Pareto front figure, the cheapest and fastest designs, the rules' table and the
inputs, checked in the written page and in headless Chromium (fixtures in conftest.py)."""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from slowlink.cli.main import app
from slowlink.report.search import _label_groups
from slowlink.search.evaluate import Point

pytest.importorskip("matplotlib")
SPACE = str(Path(__file__).resolve().parents[1] / "data" / "html-search-tiny.yaml")
runner = CliRunner()


def _search(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    out = tmp_path / "search.html"
    res = runner.invoke(app, ["search", SPACE, "--workers", "0", "--json", "--html", str(out)])
    assert res.exit_code == 0, res.output
    return out, json.loads(res.stdout)


def test_search_page_draws_the_front_and_names_cheapest_and_fastest(tmp_path: Path, parse_page: Callable[..., Any]
                                                                    ) -> None:
    out, data = _search(tmp_path)
    assert parse_page(out).figures == {"front": 1}
    text = out.read_text()
    best, fastest = data["best"], data["fastest"]
    assert best["design"] != fastest["design"]  # the tiny space's deadline leaves two different winners
    assert f"cheapest per token (*): {best['design']}" in text and f"{best['usd_per_million_tokens']:.3f}" in text
    assert f"fastest within the constraints: {fastest['design']}" in text and f"{fastest['days']:.1f}" in text
    assert "<td class=\"w\">cheapest</td>" in text and "<td class=\"w\">fastest</td>" in text
    for i, p in enumerate(data["pareto"], 1):  # every front point, numbered as on the figure, with its bottleneck
        assert f"<td>{i}</td><td class=\"w\">{html.escape(p['design'])}</td>" in text
        assert html.escape(p["bottleneck"]) in text
        assert f"front, bottleneck: {html.escape(p['bottleneck'].split(':')[0])}" in text  # the legend
    for rule, count in data["removed_by_rule"].items():
        assert f"<td class=\"w\">{rule}</td><td>{count:,}</td>" in text
    assert f"<td class=\"w\">feasible (kept)</td><td>{data['feasible']}</td>" in text
    assert "48 configurations" in text and "llama3-70b" in text and "deadline_days" in text  # the inputs
    assert "<td class=\"w\">nodes</td><td class=\"w\">64, 128</td>" in text


@pytest.mark.browser
def test_browser_renders_the_search_page(tmp_path: Path, browse: Callable[..., str], colours: Callable[..., int]
                                         ) -> None:
    out, data = _search(tmp_path)
    dom = browse(out, "--dump-dom")
    start = dom.index('id="front"')
    assert "<svg" in dom[start:dom.index("</figure>", start)]
    assert 'class="bottleneck"' in dom and html.escape(data["best"]["design"]) in dom
    png = tmp_path / "shot.png"
    browse(out, f"--screenshot={png}", "--window-size=1200,900")
    assert png.stat().st_size > 10_000
    assert colours(png) > 50  # the plot, the table and the highlight box, not a blank page


def test_near_identical_front_points_share_one_label() -> None:
    pts = [Point(i, days=d, run_usd=c) for i, (d, c) in enumerate([(3.70, 6.0e5), (3.72, 5.95e5), (3.8, 5.7e5),
                                                                     (8.0, 5.2e5), (8.05, 5.19e5), (8.1, 5.18e5)])]
    groups = [(first, last) for first, last, _ in _label_groups(pts)]
    assert groups == [(1, 2), (3, 3), (4, 6)]  # within 1.5% of a run's first point on both axes


def test_an_empty_search_still_writes_the_rules_table(tmp_path: Path, parse_page: Callable[..., Any]) -> None:
    space = tmp_path / "space.yaml"
    space.write_text(Path(SPACE).read_text().replace("deadline_days: 25", "budget_usd: 1000").replace(
        "../../examples/", str(Path(SPACE).parents[2] / "examples") + "/"))
    out = tmp_path / "empty.html"
    res = runner.invoke(app, ["search", str(space), "--workers", "0", "--html", str(out)])
    assert res.exit_code == 2 and "none of the 48 configurations is feasible" in res.output
    assert parse_page(out).figures == {}  # no front to draw, but the page says why
    text = out.read_text()
    assert "no feasible design" in text and "budget_usd removed 42, memory_fits removed 6" in text
    assert "<td class=\"w\">budget_usd</td><td>42</td>" in text and "<td>0</td><td>0.0%</td>" in text
