"""Advice across sites: each sync method, more links, RDMA and more streams, re-run through the cross-site model
and compared with the step as planned (the long haul in it)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from slowlink.assess import assess
from slowlink.sites.advice import site_advice
from slowlink.sites.plan import cross_site
from slowlink.spec.cluster import load_cluster
from slowlink.spec.workload import Sync, load_workload
from slowlink.workload.step import plan

EX = Path(__file__).parents[2] / "examples"
TWO = load_cluster(EX / "two-site-1000km.yaml")
LLAMA = load_workload(EX / "llama3-8b.yaml")


def test_ddp_across_1000_km_is_told_the_methods_that_sync_less() -> None:
    alone = plan(LLAMA, TWO)
    cross = cross_site(LLAMA, TWO, alone)
    assert cross is not None
    advice = site_advice(LLAMA, TWO, alone, cross)
    base = alone.step_time_s + cross.exposed_s
    assert advice and all(a.base_s == base and a.answers == "cross_site" for a in advice)
    assert [a.gain for a in advice] == sorted((a.gain for a in advice), reverse=True)
    hier = next(a for a in advice if a.change.startswith("sync by hierarchical"))
    x = cross_site(replace(LLAMA, sync=Sync("hierarchical")), TWO, alone)
    assert x is not None and hier.step_time_s == pytest.approx(alone.step_time_s + x.exposed_s)
    assert hier.gain == pytest.approx(1 - hier.step_time_s / base)
    diloco = next(a for a in advice if "H = 100, int8" in a.change)
    assert "INTELLECT-1" in diloco.change  # the published setting says what it is published to cost


def test_a_method_that_already_syncs_rarely_is_not_told_to_sync_more() -> None:
    w = replace(LLAMA, sync=Sync("diloco", 100, outer_dtype="int8"))
    alone = plan(w, TWO)
    cross = cross_site(w, TWO, alone)
    assert cross is not None
    assert not [a for a in site_advice(w, TWO, alone, cross) if "ddp" in a.change]


def test_the_chain_puts_site_advice_first_and_holds_the_long_haul_in_the_rest() -> None:
    a = assess(LLAMA, TWO)
    assert a.cross_site is not None and a.advice[0].answers == "cross_site"
    assert len(a.advice) > 1
    for x in a.advice:  # the step as planned: the step model's, or with its storage, the long haul in both
        assert x.base_s == pytest.approx(a.step_time_s if x.with_storage else a.step.step_time_s)
    one = assess(LLAMA, replace(TWO, sites=None))
    assert not [x for x in one.advice if x.answers == "cross_site"]


def test_a_window_bound_tcp_haul_is_told_rdma_or_more_streams() -> None:
    assert TWO.sites is not None
    ic = replace(TWO.sites.interconnect, window_bytes=4 * 2**20, streams_per_connection=1)
    slow = replace(TWO, sites=replace(TWO.sites, interconnect=ic))
    w = replace(LLAMA, sync=Sync("hierarchical"))
    alone = plan(w, slow)
    cross = cross_site(w, slow, alone)
    assert cross is not None
    changes = [a.change for a in site_advice(w, slow, alone, cross)]
    assert any(c.startswith("RDMA over the long haul") for c in changes)
    assert any(c.startswith("4 streams per cross-site connection") for c in changes)
