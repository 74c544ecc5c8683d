"""``--html FILE``: one self-contained page per run, with its figures, inputs and bottleneck sentence.

The page tests parse the HTML with the standard library; the ``browser`` tests load it in headless
Chromium (Debian's ``chromium`` package, installed by ``.ci/run``), read the rendered DOM and check that a
screenshot is not blank (fixtures ``parse_page``, ``browse``, ``colours`` in conftest.py).
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from slowlink.cli.main import app
from slowlink.errors import SpecError
from slowlink.report.html import check_html_path
from slowlink.report.plan import scale_reason
from slowlink.scale import scale
from slowlink.spec.cluster import load_cluster
from slowlink.spec.workload import load_workload
from slowlink.workload.step import plan

pytest.importorskip("matplotlib")
ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "examples"
DEMO = [str(EX / f) for f in ("ref-64gpu.yaml", "ref-64gpu-roce.yaml", "ref-64gpu-25gbe.yaml")]
WORKLOAD = str(EX / "llama3-8b.yaml")
runner = CliRunner()


def _plan(tmp_path: Path, *files: str) -> tuple[Path, list[dict[str, object]]]:
    out = tmp_path / "plan.html"
    res = runner.invoke(app, ["plan", *files, "--workload", WORKLOAD, "--json", "--html", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    return out, list(data["clusters"].values()) if len(files) > 1 else [data]


def test_plan_page_has_breakdown_sentence_and_advice_for_every_cluster(tmp_path: Path,
                                                                       parse_page: Callable[..., Any]) -> None:
    out, results = _plan(tmp_path, *DEMO)
    page = parse_page(out)
    assert page.figures == {"breakdown": 1}
    text = out.read_text()
    for r in results:
        assert html.escape(str(r["bottleneck"])) in text
        for a in r["advice"]:  # type: ignore[attr-defined]
            assert html.escape(a["change"]) in text
    for name in ("ref-64gpu", "ref-64gpu-roce", "ref-64gpu-25gbe", "llama3-8b", "DP exposed", "TP exposed"):
        assert name in text
    assert "h100-sxm" in text and "tp 2, pp 1, dp 32" in text  # the inputs
    assert "accuracy: no held-out h100-sxm run at TP 2; on " in text  # the model's measured error (no TP 2 run)
    for r in results:  # the chain's cost and what it could not price, as the terminal says them
        cost: Any = r["cost"]
        assert (f"cost: {cost['usd_per_million_tokens']:.4f} USD per million tokens" in text if "unavailable" not in
                cost else html.escape(f"cost: not priced: {cost['unavailable']}") in text)
    assert "time to train: not priced: training.tokens (None)" in text


def test_single_cluster_plan_page(tmp_path: Path, parse_page: Callable[..., Any]) -> None:
    out = tmp_path / "one.HTM"
    res = runner.invoke(app, ["plan", DEMO[0], WORKLOAD, "--html", str(out)])
    assert res.exit_code == 0, res.output
    assert parse_page(out).figures == {"breakdown": 1}
    r = plan(load_workload(WORKLOAD), load_cluster(DEMO[0]))
    assert html.escape(r.memory.sentence(load_cluster(DEMO[0]).gpu.hbm_bytes)) in out.read_text()


def test_scale_page_has_curves_and_the_reason(tmp_path: Path, parse_page: Callable[..., Any]) -> None:
    out = tmp_path / "scale.html"
    res = runner.invoke(app, ["scale", DEMO[0], WORKLOAD, "--nodes", "1,2,4,8,16", "--html", str(out)])
    assert res.exit_code == 0, res.output
    page = parse_page(out)
    assert page.figures == {"scaling": 1, "breakdown": 1}
    pts = scale(load_workload(WORKLOAD), load_cluster(DEMO[0]), [1, 2, 4, 8, 16])
    text = out.read_text()
    assert html.escape(scale_reason(pts)) in text
    assert "scaling efficiency" in text and "comm / compute" in text


def test_collective_sweep_page_draws_busbw_per_size(tmp_path: Path, parse_page: Callable[..., Any]) -> None:
    out = tmp_path / "c.html"
    res = runner.invoke(app, ["collective", DEMO[0], "--sweep", "1KiB:1GiB:4", "--html", str(out)])
    assert res.exit_code == 0, res.output
    page = parse_page(out)
    assert page.figures == {"busbw": 1}
    text = out.read_text()
    assert "busbw (GB/s)" in text and "ring" in text and "at 1GiB:" in text
    assert text.count("<tr>") == 1 + 11 + 1 + 4  # sweep header + 11 sizes, inputs header + 4 cluster rows


def test_collective_compare_overlays_the_measured_record(tmp_path: Path, parse_page: Callable[..., Any]) -> None:
    rows = [{"op": "all_reduce", "size_bytes": 2**k, "ranks": 2, "redop": "sum", "time_s": 2e-3 + 2**k / 0.8e9,
             "busbw_gbyte_s": 2**k / (2e-3 + 2**k / 0.8e9) / 1e9, "algbw_gbyte_s": 0.0, "count": 2**k // 4,
             "type": "float", "root": -1, "wrong": 0, "in_place": None} for k in range(20, 25)]
    rec = tmp_path / "rec.json"
    rec.write_text(json.dumps({"kind": "collectives", "env": {"hostnames": ["a", "a"]}, "config": {}, "rows": rows}))
    for name in ("bench-localhost.yaml", "bench-cpu-catalog.yaml"):
        (tmp_path / name).write_text((EX / name).read_text())
    out = tmp_path / "cmp.html"
    res = runner.invoke(app, ["collective", str(tmp_path / "bench-localhost.yaml"), "--compare", str(rec),
                              "--html", str(out)])
    assert res.exit_code == 0, res.output
    assert parse_page(out).figures == {"busbw": 1}
    text = out.read_text()
    assert ">measured<" in text and ">model<" in text and "time error mean" in text


def test_simulate_page_has_slowdowns_and_heatmap(tmp_path: Path, parse_page: Callable[..., Any]) -> None:
    out = tmp_path / "sim.html"
    res = runner.invoke(app, ["simulate", str(EX / "scenario-two-jobs.yaml"), "--html", str(out)])
    assert res.exit_code == 0, res.output
    assert parse_page(out).figures == {"slowdown": 1, "heatmap": 1}
    text = out.read_text()
    assert "1.61x" in text and "busiest link" in text and "log scale" in text


def test_names_are_escaped(tmp_path: Path, parse_page: Callable[..., Any]) -> None:
    cluster = tmp_path / "c.yaml"
    cluster.write_text(Path(DEMO[0]).read_text().replace("name: ref-64gpu", "name: '<i>x</i> & y'"))
    out, _ = _plan(tmp_path, str(cluster), DEMO[1])
    parse_page(out)
    text = out.read_text()
    assert "<i>x</i>" not in text and "&lt;i&gt;x&lt;/i&gt; &amp; y" in text


@pytest.mark.parametrize(("target", "message"), [
    ("missing/plan.html", "folder"),
    ("plan.txt", "must end in .html or .htm"),
    ("plan", "must end in .html or .htm"),
])
@pytest.mark.parametrize("command", [
    ["plan", DEMO[0], WORKLOAD],
    ["plan", *DEMO, "--workload", WORKLOAD],
    ["scale", DEMO[0], WORKLOAD],
    ["collective", DEMO[0], "--sweep", "8:1MiB:2"],
    ["simulate", str(EX / "scenario-two-jobs.yaml")],
])
def test_bad_output_path_is_exit_2_before_any_work(tmp_path: Path, command: list[str], target: str,
                                                   message: str) -> None:
    out = tmp_path / target
    res = runner.invoke(app, [*command, "--html", str(out)])
    assert res.exit_code == 2, res.output
    assert "--html" in res.output and message in res.output and "Traceback" not in res.output
    assert res.stdout.strip() == "" or "error" in res.stdout  # no table: the check ran before the work
    assert list(tmp_path.iterdir()) == []


def test_a_folder_is_not_a_file(tmp_path: Path) -> None:
    (tmp_path / "x.html").mkdir()
    with pytest.raises(SpecError, match="is a folder"):
        check_html_path(tmp_path / "x.html")
    check_html_path(None)


# ---- in a real browser ---------------------------------------------------------------------------------

@pytest.mark.browser
@pytest.mark.parametrize("kind", ["plan", "scale"])
def test_browser_renders_the_page(tmp_path: Path, kind: str, browse: Callable[..., str],
                                  colours: Callable[..., int]) -> None:
    if kind == "plan":
        out, results = _plan(tmp_path, *DEMO)
        figures, sentence = ["breakdown"], str(results[2]["bottleneck"])
    else:
        out = tmp_path / "scale.html"
        res = runner.invoke(app, ["scale", DEMO[0], WORKLOAD, "--nodes", "1,2,4,8", "--html", str(out)])
        assert res.exit_code == 0, res.output
        figures, sentence = ["scaling", "breakdown"], "efficiency"
    dom = browse(out, "--dump-dom")
    for fid in figures:
        start = dom.index(f'id="{fid}"')
        assert "<svg" in dom[start:dom.index("</figure>", start)]
    assert html.escape(sentence) in dom and 'class="bottleneck"' in dom
    png = tmp_path / "shot.png"
    browse(out, f"--screenshot={png}", "--window-size=1200,900")
    assert png.stat().st_size > 10_000
    assert colours(png) > 50  # text, bars and the highlight box, not a blank page
