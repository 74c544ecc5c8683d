"""The emulated two sites without root: the plan's links, the model's prediction on them, and the refusals."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from slowlink import units
from slowlink.emulate.plan import DEFAULT_SCALE
from slowlink.emulate.sites import TCP_HEADER_BYTES, emulated_interconnect, measure, predict, site_plan
from slowlink.emulate.validate import TCP_PAYLOAD_FRACTION
from slowlink.errors import EmulationError
from slowlink.spec.cluster import load_cluster

EX = Path(__file__).parents[2] / "examples"
TWO = load_cluster(EX / "emulate-two-site.yaml")


def test_two_sites_joined_by_a_shaped_delayed_long_haul() -> None:
    plan = site_plan(TWO, DEFAULT_SCALE)
    assert [x.name for x in plan.links] == ["n0", "n1", "dci"]
    dci = plan.link("dci")
    assert (dci.a, dci.b) == plan.switches and dci.delay_s == pytest.approx(0.005)  # 10 ms RTT, half each way
    assert dci.rate_bytes_s == pytest.approx(10 * units.Gbit * DEFAULT_SCALE)  # 40 Mbit/s
    assert plan.link("n0").rate_bytes_s == pytest.approx(25 * units.Gbit * DEFAULT_SCALE)
    ic = emulated_interconnect(TWO, plan)
    assert ic.link_bytes_s == pytest.approx(dci.rate_bytes_s * 1448 / 1514) and ic.rtt_s == pytest.approx(0.01)
    assert TCP_HEADER_BYTES == 1514 - 1448 and TCP_PAYLOAD_FRACTION == 1448 / 1514


def test_the_prediction_by_hand() -> None:
    ic = emulated_interconnect(TWO, site_plan(TWO, DEFAULT_SCALE))
    r = ic.link_bytes_s
    s = 500_000 * 4  # fp32 gradient
    ddp = predict("ddp", 500_000, 1, ic)
    # two ranks, one per site: the ring sends S each way in two one-way crossings (one RTT)
    assert ddp.bytes_per_step == s and ddp.sync_s == pytest.approx(s / r + 0.01)
    diloco = predict("diloco", 500_000, 4, ic)
    assert diloco.bytes_per_step == s / 4 and diloco.step_s(0.01) == pytest.approx(0.01 + (s / r + 0.01) / 4)
    int8 = predict("diloco", 500_000, 4, ic, "int8")  # one byte per parameter
    assert int8.bytes_per_step == 500_000 / 4 and int8.sync_s == pytest.approx(500_000 / r + 0.01)


def test_refusals(cli_fails: Callable[..., str]) -> None:
    with pytest.raises(EmulationError, match=r"sites \(0\) must name 2 sites"):
        site_plan(replace(TWO, sites=None), DEFAULT_SCALE)
    with pytest.raises(EmulationError, match=r"scale \(1e-06\) gives a node link 0.025 Mbit/s"):
        site_plan(TWO, 1e-6)
    assert TWO.sites is not None
    slow = replace(TWO.sites, interconnect=replace(TWO.sites.interconnect, link_bytes_s=0.1 * units.Gbit))
    with pytest.raises(EmulationError, match=r"gives the long haul 0.4 Mbit/s"):
        site_plan(replace(TWO, sites=slow), DEFAULT_SCALE)
    plan = site_plan(TWO, DEFAULT_SCALE)
    with pytest.raises(EmulationError, match=r"method \(.allgather.\) must be ddp or diloco"):
        measure(plan, TWO, "allgather", 1000, 4, 1)
    with pytest.raises(EmulationError, match=r"outer_dtype \('fp4'\) must be one of fp32, int8"):
        measure(plan, TWO, "diloco", 1000, 4, 4, inner_steps=4, outer_dtype="fp4")
    with pytest.raises(EmulationError, match=r"steps \(6\) must be a positive multiple of inner_steps \(4\)"):
        measure(plan, TWO, "diloco", 1000, 6, 4, inner_steps=4)
    cli_fails(["emulate", "sites", str(EX / "ref-64gpu.yaml")], "sites (0) must name 2 sites")
