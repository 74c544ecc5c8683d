"""Delay and loss on one link without netem (a relay namespace), rails, and their cleanup (root only)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slowlink.emulate import net
from slowlink.emulate.measure import ping_ok, rtt_s, throughput
from slowlink.emulate.plan import build_plan
from slowlink.spec.cluster import load_cluster

EX = Path(__file__).parents[2] / "examples"
pytestmark = [pytest.mark.netns]


def test_delay_loss_and_clear_on_one_link() -> None:
    plan = net.up(build_plan(load_cluster(EX / "emulate-flat.yaml"), delay_s={"n0": 0.02}))
    try:
        # n0 is delayed 20 ms each way, n1 not: 0 <-> 1 crosses the delay once per direction.
        assert 0.04 <= rtt_s(plan, 0, 1) < 0.06
        assert rtt_s(plan, 1, 2) < 0.01
        (rate,) = throughput(plan, [(1, 0)], duration_s=3.0)
        assert rate == pytest.approx(plan.node_rate_bytes_s, rel=0.2)  # the relay keeps up with the link
        plan = net.impair(plan, "n1", loss=0.9)
        assert not ping_ok(plan, 2, 1, timeout_s=0.5)
        plan = net.impair(plan, "n1")
        assert ping_ok(plan, 2, 1)
        assert f"{plan.relay_ns(plan.link('n0'))}" in net.list_namespaces()
    finally:
        net.down(plan.run_id)
    assert not [ns for ns in net.list_namespaces() if ns.startswith(f"sl-{plan.run_id}")]


def test_every_rail_is_its_own_link() -> None:
    plan = net.up(build_plan(load_cluster(EX / "emulate-rails.yaml")))
    try:
        assert ping_ok(plan, 0, 3, rail=0) and ping_ok(plan, 0, 3, rail=1)
        net.set_link(plan, "n3r1", "down")
        assert ping_ok(plan, 0, 3, rail=0) and not ping_ok(plan, 0, 3, rail=1, timeout_s=0.5)
    finally:
        net.down(plan.run_id)
