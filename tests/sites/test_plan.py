"""The chain with sites: the step includes the exposed cross-site time, plan --json gains cross_site, and a
cluster without sites plans as before."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slowlink.assess import assess
from slowlink.cli.main import app
from slowlink.errors import InfeasiblePlan
from slowlink.sites.plan import cross_site
from slowlink.spec.cluster import load_cluster
from slowlink.spec.workload import Parallel, Sync, load_workload
from slowlink.workload.flops import params
from slowlink.workload.step import plan

EX = Path(__file__).parents[2] / "examples"
TWO = load_cluster(EX / "two-site-1000km.yaml")
LLAMA = load_workload(EX / "llama3-8b.yaml")
KEYS = {"sites", "dims", "bytes_per_step", "exposed_s", "dci_utilisation", "method", "convergence_note"}


def test_the_step_includes_the_exposed_cross_site_time() -> None:
    a = assess(LLAMA, TWO, full=False)
    alone = plan(LLAMA, TWO)
    assert a.cross_site is not None and a.cross_site.exposed_s > 0
    assert a.step.step_time_s == pytest.approx(alone.step_time_s + a.cross_site.exposed_s)
    assert a.step.mfu == pytest.approx(alone.mfu * alone.step_time_s / a.step.step_time_s)


def test_hierarchical_bytes_per_step_by_hand() -> None:
    # tp 2: two DP groups of 32 ranks, each reducing its half of the model's bf16 gradient, G = 8.03e9 / 2 x 2 B;
    # 2 sites, each sends 2 (2-1)/2 x G per group
    w = replace(LLAMA, sync=Sync("hierarchical"))
    dense, expert = params(w.model)
    assert dense == pytest.approx(8.03e9, rel=1e-3) and expert == 0
    g = dense / 2 * 2
    x = cross_site(w, TWO, plan(w, TWO))
    assert x is not None and x.dims == ("dp",) and x.sites == ("east", "west")
    assert x.bytes_per_step == pytest.approx(2 * 2 * g)  # 2 sites x 2 groups x 2 (2-1)/2 x G


def test_methods_that_sync_less_wait_less() -> None:
    step = plan(LLAMA, TWO)
    exposed = {}
    for sync in (Sync("ddp"), Sync("hierarchical"), Sync("diloco", 100, outer_dtype="int8"),
                 Sync("streaming-diloco", 100, outer_dtype="fp4", fragments=10, overlap_steps=5)):
        x = cross_site(replace(LLAMA, sync=sync), TWO, step)
        assert x is not None
        exposed[sync.method] = x.exposed_s
    assert exposed["ddp"] > exposed["hierarchical"] > exposed["diloco"] > exposed["streaming-diloco"] == 0.0


def test_diloco_waits_one_blocking_sync_per_h_steps() -> None:
    step = plan(LLAMA, TWO)
    x10 = cross_site(replace(LLAMA, sync=Sync("diloco", 10)), TWO, step)
    x100 = cross_site(replace(LLAMA, sync=Sync("diloco", 100)), TWO, step)
    assert x10 is not None and x100 is not None
    assert x10.exposed_s == pytest.approx(x10.sync_s / 10) and x100.exposed_s == pytest.approx(x10.exposed_s / 10)


def test_a_replica_never_spans_sites() -> None:
    w = replace(LLAMA, parallel=Parallel.of(tp=8, pp=8, dp=1))
    with pytest.raises(InfeasiblePlan, match="site east holds 32 GPUs, not a multiple of") as e:
        cross_site(w, TWO, plan(w, TWO, check_memory=False))
    assert e.value.rule == "site_holds_replicas"


def _plan_json(*args: str) -> dict[str, object]:
    res = CliRunner().invoke(app, ["plan", *args, "--json"])
    assert res.exit_code == 0, res.output
    out: dict[str, object] = json.loads(res.output)
    return out


def test_plan_json_gains_cross_site_only_with_sites() -> None:
    two = _plan_json(str(EX / "two-site-1000km.yaml"), str(EX / "llama3-8b.yaml"))
    cross = two["cross_site"]
    assert isinstance(cross, dict) and set(cross) >= KEYS and cross["method"] == "ddp"
    one = _plan_json(str(EX / "ref-64gpu.yaml"), str(EX / "llama3-8b.yaml"))
    assert "cross_site" not in one
    assert float(str(two["step_time_s"])) == pytest.approx(float(str(one["step_time_s"])) + cross["exposed_s"])


def test_plan_says_what_crosses() -> None:
    res = CliRunner().invoke(app, ["plan", str(EX / "two-site-1000km.yaml"), str(EX / "llama3-8b.yaml")])
    assert res.exit_code == 0, res.output
    assert "cross-site: dp crosses east | west by ddp: 62.2 GB per step" in res.output


def test_sync_on_a_one_site_cluster_changes_nothing() -> None:
    ref, llama = str(EX / "ref-64gpu.yaml"), str(EX / "llama3-8b.yaml")
    plain = _plan_json(ref, llama)
    synced = _plan_json(ref, llama, "--set", "workload.sync.method=hierarchical")
    plain.pop("slowlink")
    synced.pop("slowlink")  # the inputs echo the --set; every answer is the same
    assert synced == plain


def test_experts_and_context_parallel_are_counted_once() -> None:
    # Mixtral 8x7B, ep 8, cp 2: the tp x pp groups reduce the whole model's slice (every expert) over dp x cp ranks
    w = replace(load_workload(EX / "mixtral-8x7b.yaml"), sync=Sync("hierarchical"),
                parallel=Parallel.of(tp=2, dp=16, cp=2, ep=8, zero=1))
    p = w.parallel
    dense, expert = params(w.model)
    step = plan(w, TWO, check_memory=False)
    x = cross_site(w, TWO, step)
    assert x is not None
    assert x.bytes_per_step == pytest.approx(2 * (dense + expert) * 2)  # 2 sites x the whole bf16 model
    assert p.tp * p.pp * p.dp * p.cp == 64
