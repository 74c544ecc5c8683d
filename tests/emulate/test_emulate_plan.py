"""The emulation plan (pure): namespaces, links and rates derived from a cluster file."""

from __future__ import annotations

from pathlib import Path

import pytest

from slowlink import units
from slowlink.emulate.plan import build_plan
from slowlink.errors import EmulationError
from slowlink.spec.cluster import load_cluster

EX = Path(__file__).parents[2] / "examples"


def test_two_leaf_tree_oversubscribes_the_uplink() -> None:
    c = load_cluster(EX / "emulate-2leaf.yaml")
    plan = build_plan(c, scale=0.004, run_id="abcd")
    node = 25 * units.Gbit * 0.004
    assert plan.topology == "fat-tree"
    assert len(plan.nodes) == 4 and len(plan.switches) == 3
    assert all(ns.startswith("sl-abcd-") for ns in plan.namespaces)
    ups = [x for x in plan.links if x.name.startswith("up")]
    assert len(ups) == 2
    # 2 nodes per leaf at `node` each, 2:1 oversubscribed: uplink = 2 * node / 2.
    assert ups[0].rate_bytes_s == pytest.approx(2 * node / 2.0, rel=1e-12)
    assert plan.link("n0").rate_bytes_s == pytest.approx(node, rel=1e-12)


def test_flat_switch_has_one_switch() -> None:
    plan = build_plan(load_cluster(EX / "emulate-flat.yaml"))
    assert plan.topology == "single-switch" and len(plan.switches) == 1
    assert len(set(plan.addresses)) == 4 and all(a.startswith("10.213.") for a in plan.addresses)


@pytest.mark.parametrize(("kw", "msg"), [({"nodes": 0}, "nodes (0)"), ({"scale": 2.0}, "scale (2.0)"),
                                          ({"scale": 1e-9}, "Mbit/s per NIC")])
def test_bad_inputs(kw: dict[str, float], msg: str) -> None:
    with pytest.raises(EmulationError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        build_plan(load_cluster(EX / "emulate-2leaf.yaml"), **kw)  # type: ignore[arg-type]


def test_unknown_link_is_named() -> None:
    plan = build_plan(load_cluster(EX / "emulate-2leaf.yaml"))
    with pytest.raises(EmulationError, match="link \\('nope'\\) is not a link"):
        plan.link("nope")


def test_rails_get_one_link_and_bridge_each() -> None:
    plan = build_plan(load_cluster(EX / "emulate-rails.yaml"), run_id="abcd")
    assert plan.rails == 2 and plan.topology == "single-switch"
    assert {x.name for x in plan.links} == {f"n{k}r{r}" for k in range(4) for r in range(2)}
    assert plan.link("n2r1").dev_a == "eth1" and plan.link("n2r1").rail == 1
    assert plan.address(2, 1) == "10.213.1.3"
    assert plan.node_rate_bytes_s == pytest.approx(12.5 * units.Gbit * plan.scale, rel=1e-12)


def test_delay_and_loss_land_on_their_link() -> None:
    plan = build_plan(load_cluster(EX / "emulate-2leaf.yaml"), delay_s={"up0": 0.005}, loss={"n1": 0.01})
    assert plan.link("up0").delay_s == 0.005 and plan.link("n1").loss == 0.01
    assert not plan.link("n0").impaired and plan.relay_ns(plan.link("up0")).endswith("-r-up0")


@pytest.mark.parametrize(("kw", "msg"), [({"delay_s": {"zz": 0.1}}, "delay ('zz') is not a link"),
                                          ({"loss": {"n0": 1.5}}, "loss of n0 (1.5) must be in")])
def test_bad_impairments(kw: dict[str, dict[str, float]], msg: str) -> None:
    with pytest.raises(EmulationError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        build_plan(load_cluster(EX / "emulate-2leaf.yaml"), **kw)  # type: ignore[arg-type]
