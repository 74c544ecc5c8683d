"""Pipeline stages across sites (sync.crosses: pp): the activations' bytes by hand, the exposed time by the 1F1B
rule, and the refusals."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slowlink.cli.main import app
from slowlink.errors import InfeasiblePlan
from slowlink.sites.pipeline import pipeline_crossings, pp_hop_in_site_s
from slowlink.sites.plan import cross_site
from slowlink.spec.cluster import load_cluster
from slowlink.spec.sites import Site
from slowlink.spec.workload import Sync, load_workload
from slowlink.workload.step import fit_dp, plan

EX = Path(__file__).parents[2] / "examples"
TWO = load_cluster(EX / "two-site-1000km.yaml")
LLAMA = load_workload(EX / "llama3-8b.yaml")


def _pp(pp: int = 2, vp: int = 1) -> object:
    w = replace(LLAMA, parallel=replace(LLAMA.parallel, pp=pp, vp=vp, dp=64 // (2 * pp)), sync=Sync(crosses="pp"))
    return fit_dp(w, TWO)


def test_the_activations_bytes_by_hand() -> None:
    w = _pp()
    step = plan(w, TWO)  # type: ignore[arg-type]
    x = cross_site(w, TWO, step)  # type: ignore[arg-type]
    assert x is not None and x.dims == ("pp",) and x.method == "ddp"
    # 512 / (1 x 16) = 32 micro-batches; 16 dp x 2 tp = 32 pipelines; one boundary each way; the hop is
    # 8192 tokens x 4096 hidden x 2 bytes, split over tp 2 under SP
    hop = 8192 * 4096 * 2 / 2
    assert x.bytes_per_step == pytest.approx(32 * 32 * 2 * 1 * hop)
    assert TWO.sites is not None
    rtt = TWO.sites.interconnect.rtt_s
    assert x.sync_s == pytest.approx(hop / (x.egress_bytes_s / 32) + rtt / 2)
    inside = pp_hop_in_site_s(w, step)  # type: ignore[arg-type]
    assert x.exposed_s == pytest.approx(2 * (32 + 1) * (x.sync_s - inside))


def test_interleaving_crosses_more_often() -> None:
    assert pipeline_crossings(1, 2) == 1 and pipeline_crossings(2, 2) == 3 and pipeline_crossings(1, 4) == 3
    w1, w2 = _pp(4, 1), _pp(4, 2)
    x1 = cross_site(w1, TWO, plan(w1, TWO))  # type: ignore[arg-type]
    x2 = cross_site(w2, TWO, plan(w2, TWO))  # type: ignore[arg-type]
    assert x1 is not None and x2 is not None and x2.bytes_per_step == pytest.approx(3 * x1.bytes_per_step)


def test_stages_that_do_not_split_evenly_are_refused() -> None:
    w = _pp(1)
    with pytest.raises(InfeasiblePlan, match=r"parallel.pp \(1\) must be a multiple of the sites \(2\)") as e:
        cross_site(w, TWO, plan(w, TWO))  # type: ignore[arg-type]
    assert e.value.rule == "site_holds_stages"
    assert TWO.sites is not None
    lopsided = replace(TWO, sites=replace(TWO.sites, sites=(Site("east", 6), Site("west", 2))))
    w = _pp()
    with pytest.raises(InfeasiblePlan, match=r"site east holds 48 GPUs, not 64 / 2 = 32"):
        cross_site(w, lopsided, plan(w, lopsided))  # type: ignore[arg-type]


def test_plan_json_and_the_spec_refusal(tmp_path: Path) -> None:
    wl = tmp_path / "w.yaml"
    text = (EX / "llama3-8b.yaml").read_text().replace("pp: 1, dp: 32", "pp: 2, dp: 16")
    wl.write_text(text + "sync: {crosses: pp}\n")
    r = CliRunner().invoke(app, ["plan", str(EX / "two-site-1000km.yaml"), str(wl), "--json"])
    assert r.exit_code == 0, r.output
    js = json.loads(r.output)
    js = js[0] if isinstance(js, list) else js
    assert js["cross_site"]["dims"] == ["pp"]
    bad = tmp_path / "b.yaml"
    bad.write_text(text + "sync: {crosses: pp, method: diloco, inner_steps: 100}\n")
    r = CliRunner().invoke(app, ["plan", str(EX / "two-site-1000km.yaml"), str(bad)])
    assert r.exit_code == 2 and "sync.crosses (pp) with method diloco" in r.output and "Traceback" not in r.output
    odd = tmp_path / "o.yaml"
    odd.write_text((EX / "llama3-8b.yaml").read_text() + "sync: {crosses: pp}\n")  # pp 1
    r = CliRunner().invoke(app, ["plan", str(EX / "two-site-1000km.yaml"), str(odd)])
    assert r.exit_code == 2 and "parallel.pp (1) must be a multiple of the sites (2)" in r.output
