"""A real 4-node 2-leaf fat tree in network namespaces (root only): throughput, faults and cleanup."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slowlink.emulate import net
from slowlink.emulate.measure import ping_ok, throughput
from slowlink.emulate.plan import Plan, build_plan
from slowlink.emulate.validate import TCP_PAYLOAD_FRACTION
from slowlink.spec.cluster import load_cluster

EX = Path(__file__).parents[2] / "examples"


pytestmark = [pytest.mark.netns]


def _host_links() -> str:
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return "\n".join(sorted(line.split(":")[1].strip() for line in out.splitlines()))


@pytest.fixture(scope="module")
def tree() -> Iterator[Plan]:
    plan = net.up(build_plan(load_cluster(EX / "emulate-2leaf.yaml")))
    yield plan
    net.down(plan.run_id)


def test_cross_leaf_flows_share_the_oversubscribed_uplink(tree: Plan) -> None:
    node = tree.node_rate_bytes_s * TCP_PAYLOAD_FRACTION  # TCP goodput of one node link
    (within,) = throughput(tree, [(0, 1)], duration_s=1.0)
    # One direction at a time: with both directions at once each queue also carries the other direction's
    # ACKs, and the two uplinks measured 83-100% of the node rate in six runs (one below the 15% margin),
    # against 100-103% one direction at a time.
    up = throughput(tree, [(0, 2), (1, 3)], duration_s=1.5)
    down = throughput(tree, [(2, 0), (3, 1)], duration_s=1.5)
    # One flow inside a leaf gets its node link; two flows per direction share one uplink of one node rate.
    assert within == pytest.approx(node, rel=0.15)
    assert sum(up) == pytest.approx(node, rel=0.15)
    assert sum(down) == pytest.approx(node, rel=0.15)
    assert within / (sum(up) / 2) > 1.6


def test_link_down_and_up(tree: Plan) -> None:
    net.set_link(tree, "up0", "down")
    assert not ping_ok(tree, 0, 2)
    assert ping_ok(tree, 0, 1)
    net.set_link(tree, "up0", "up")
    assert ping_ok(tree, 0, 2)


def test_rate_change(tree: Plan) -> None:
    net.set_rate(tree, "n0", tree.node_rate_bytes_s / 4)
    try:
        (r,) = throughput(tree, [(0, 1)], duration_s=1.0)
        assert r == pytest.approx(tree.node_rate_bytes_s / 4, rel=0.2)
    finally:
        net.set_rate(tree, "n0", tree.node_rate_bytes_s)


def test_kill_one_node(tree: Plan) -> None:
    (p,) = net.spawn(tree, ["sleep", "30"], [3])
    for _ in range(100):  # `ip netns exec` enters the namespace a moment after it starts
        if net.kill_node(tree, 3):
            break
        time.sleep(0.02)
    assert p.wait(timeout=5) != 0


def test_down_and_crash_leave_nothing() -> None:
    before = _host_links()  # an emulation keeps every link inside its namespaces: the host's never change
    plan = net.up(build_plan(load_cluster(EX / "emulate-flat.yaml")))
    assert set(plan.namespaces) <= set(net.list_namespaces())
    # A crash: the state file goes, the namespaces stay; `down` sweeps them by the run's prefix. (`down()` with no
    # run sweeps every sl- namespace on the host: not here, where other emulations may be running.)
    net.state_file(plan.run_id).unlink()
    assert sorted(net.down(plan.run_id)) == sorted(plan.namespaces)
    assert net.down(plan.run_id) == []  # idempotent
    assert not [ns for ns in net.list_namespaces() if ns.startswith(f"sl-{plan.run_id}-")]
    assert _host_links() == before
