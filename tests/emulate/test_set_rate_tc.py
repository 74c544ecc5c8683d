"""Reshaping a live link (`emulate rate`) leaves both ends' tbf exactly as a fresh link at that rate has it: the
rate, the burst and the latency that sets its queue limit, read back from ``tc -j qdisc show`` (root only; no
traffic measured)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from slowlink.emulate import net
from slowlink.emulate.plan import Plan, build_plan
from slowlink.spec.cluster import load_cluster

EX = Path(__file__).parents[2] / "examples"
pytestmark = [pytest.mark.netns]


def _tbf(plan: Plan, name: str) -> list[dict[str, Any]]:
    """Both ends' root qdisc options of link ``name``."""
    link = plan.link(name)
    out = []
    for ns, dev in ((link.a, link.dev_a), (link.b, link.dev_b)):
        (q,) = [q for q in json.loads(net.nsx(ns, "tc", "-j", "qdisc", "show", "dev", dev).stdout) if q.get("root")]
        assert q["kind"] == "tbf"
        out.append(q["options"])
    return out


def test_raising_a_live_rate_reshapes_both_ends_as_a_fresh_link() -> None:
    plan = net.up(build_plan(load_cluster(EX / "emulate-flat.yaml")))
    try:
        rate = plan.link("n0").rate_bytes_s
        fresh = _tbf(plan, "n0")
        assert fresh[0] == fresh[1] and fresh[0]["rate"] == pytest.approx(rate, rel=1e-6)
        plan = net.set_rate(plan, "n0", rate / 4)
        assert [o["rate"] for o in _tbf(plan, "n0")] == pytest.approx([rate / 4] * 2, rel=1e-6)
        plan = net.set_rate(plan, "n0", rate)  # raised again: the same qdisc as the fresh one, burst and limit too
        assert _tbf(plan, "n0") == fresh
        plan = net.set_rate(plan, "n0", rate * 4)
        raised = _tbf(plan, "n0")
        assert [o["rate"] for o in raised] == pytest.approx([rate * 4] * 2, rel=1e-6)
        assert all(o["lat"] == fresh[0]["lat"] for o in raised)  # the queue limit follows the new rate
        # one link only: another node's link keeps its rate (a job across n0 and n1 still runs at n1's)
        assert _tbf(plan, "n1") == fresh and plan.link("n1").rate_bytes_s == rate
    finally:
        net.down(plan.run_id)
