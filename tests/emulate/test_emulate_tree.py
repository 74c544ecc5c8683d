"""The done-when of the emulation (root + torch): a 4-node 2-leaf 2:1 fat tree running gloo collectives.

It shows the cross-leaf slowdown the topology implies, agrees with the flow model, and leaves nothing
behind in the host: no namespace, link, qdisc or state file.
"""

from __future__ import annotations

import importlib.util
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from slowlink import units
from slowlink.emulate import net
from slowlink.emulate.measure import collective
from slowlink.emulate.plan import Plan, build_plan
from slowlink.emulate.validate import TCP_PAYLOAD_FRACTION, emulated_cluster, emulated_topology
from slowlink.sim.collectives import simulate_collective
from slowlink.spec.cluster import load_cluster

EX = Path(__file__).parents[2] / "examples"
pytestmark = [pytest.mark.netns, pytest.mark.torch,
              pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")]
SIZE = 2 * units.MiB


def _host() -> tuple[str, str]:
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    names = "\n".join(sorted(line.split(":")[1].strip() for line in links.splitlines()))
    return names, subprocess.run(["tc", "qdisc", "show"], capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def host_before() -> tuple[str, str]:
    return _host()


@pytest.fixture(scope="module")
def tree(host_before: tuple[str, str]) -> Iterator[Plan]:
    plan = net.up(build_plan(load_cluster(EX / "emulate-2leaf.yaml")))
    yield plan
    net.down(plan.run_id)


def test_all_reduce_matches_the_ring_bound_and_the_flow_model(tree: Plan) -> None:
    t = min(collective(tree, "all_reduce", SIZE, iters=2))
    goodput = tree.node_rate_bytes_s * TCP_PAYLOAD_FRACTION
    # Ring all_reduce wire bound: 2 (n-1)/n S / goodput; a ring crosses each 2:1 uplink once per direction.
    assert t >= 2 * 3 / 4 * SIZE / goodput * 0.97
    c = emulated_cluster(load_cluster(EX / "emulate-2leaf.yaml"), tree)
    pred, _ = simulate_collective(c, "all_reduce", SIZE, topo=emulated_topology(c, tree))
    assert pred.time_s == pytest.approx(t, rel=0.15)


def test_all_to_all_is_slowed_by_the_oversubscribed_uplink(tree: Plan) -> None:
    t = min(collective(tree, "all_to_all", SIZE, iters=2))
    goodput = tree.node_rate_bytes_s * TCP_PAYLOAD_FRACTION
    node_bound = 3 / 4 * SIZE / goodput  # a flat switch: each node link carries 3 of its 4 chunks
    # Each uplink direction carries 2 nodes x 2 remote chunks = S, at one node rate (2 x rate / 2:1).
    uplink_bound = 2 * 2 * (SIZE / 4) / goodput
    assert uplink_bound / node_bound == pytest.approx(4 / 3)
    assert t >= 0.95 * uplink_bound
    assert t > 1.2 * node_bound


def test_nothing_is_left_behind(tree: Plan, host_before: tuple[str, str]) -> None:
    net.down(tree.run_id)
    net.down(tree.run_id)  # idempotent
    assert not [ns for ns in net.list_namespaces() if ns.startswith("sl-")]
    assert _host() == host_before
    assert not net.state_file(tree.run_id).exists()
