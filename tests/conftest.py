"""Fixtures shared across the test packages: small clusters of every topology for the simulator and topology
tests (``make_cluster``, ``topology_cluster``; tests taking ``topology`` run once per topology), and
``cli_fails``, the check that a command refuses its input cleanly (exit 2, no traceback, the message)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from slowlink.spec.cluster import Cluster, cluster_from_mapping


def _make_cluster(nodes: int = 8, gpn: int = 4, nics: int = 2, domain: int | None = None, gpu: str = "h100-sxm",
                 link: str = "nvlink4", placement: dict[str, Any] | None = None, **fabric: Any) -> Cluster:
    fab = {"transport": "infiniband", "tiers": 2, **fabric}
    extra = {"placement": placement} if placement else {}
    return cluster_from_mapping({**extra,
        "name": "t", "nodes": nodes, "gpus_per_node": gpn, "gpu": gpu,
        "scale_up": {"link": link, "domain_gpus": domain or gpn},
        "nics": {"compute": {"per_node": nics, "speed_gbit_s": 400}},
        "fabric": fab,
    })


# Small radixes so that few nodes span several switches; a 2-tier tree needs leaves <= radix (topology/shape.py).
TOPOLOGIES: dict[str, dict[str, Any]] = {
    "single-switch": {"topology": "single-switch"},
    "fat2-ecmp": {"switch_radix": 8, "routing": "ecmp"},
    "fat2-dmodk": {"switch_radix": 8, "routing": "dmodk"},
    "fat2-4to1-ecmp": {"switch_radix": 10, "oversubscription": 4, "routing": "ecmp"},
    "fat2-spray": {"switch_radix": 8, "routing": "adaptive"},
    "fat3-ecmp": {"switch_radix": 4, "tiers": 3, "routing": "ecmp"},
    "fat3-dmodk": {"switch_radix": 4, "tiers": 3, "routing": "dmodk"},
    "fat3-spray-1-1-2": {"switch_radix": 4, "tiers": 3, "oversubscription": [1, 1, 2], "routing": "adaptive"},
    "rail2": {"topology": "rail-optimized", "switch_radix": 8},
    "rail3": {"topology": "rail-optimized", "switch_radix": 4, "tiers": 3},
    "dragonfly-ecmp": {"topology": "dragonfly", "switch_radix": 4, "routing": "ecmp", "dragonfly": {"groups": 4}},
    "dragonfly-spray": {"topology": "dragonfly", "switch_radix": 4, "routing": "adaptive",
                        "dragonfly": {"groups": 4, "global_links_per_switch": 2}},
    "nvl-spanning-nodes": {"switch_radix": 8, "_domain": 8},
    "fragmented": {"switch_radix": 8, "_placement": True},
}


def _topology_cluster(name: str) -> Cluster:
    fab = dict(TOPOLOGIES[name])
    domain = fab.pop("_domain", None)
    frag = fab.pop("_placement", False)
    return _make_cluster(domain=domain, placement={"mode": "fragmented", "seed": 5} if frag else None, **fab)


@pytest.fixture
def make_cluster() -> Callable[..., Cluster]:
    return _make_cluster


@pytest.fixture
def topology_cluster() -> Callable[[str], Cluster]:
    return _topology_cluster


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "topology" in metafunc.fixturenames:
        metafunc.parametrize("topology", sorted(TOPOLOGIES))


def _cli_fails(args: list[str], *needles: str) -> str:
    """Run ``slowlink ARGS`` in-process and check a clean refusal: exit 2, no traceback, every needle in the
    output; returns the output."""
    from typer.testing import CliRunner

    from slowlink.cli.main import app

    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    for n in needles:
        assert n in res.output, res.output
    return res.output


@pytest.fixture
def cli_fails() -> Callable[..., str]:
    """``cli_fails(args, *needles)``: the one bad-input check of every CLI test (exit 2, no traceback, the
    message's needles), returning the output."""
    return _cli_fails


def _simulated_phase(topo: Any, flows: Any) -> Any:
    from slowlink.sim.engine import simulate

    r = simulate(topo.capacity_bytes_s, topo.latency_s, flows)
    assert r.link_rate_bytes_s is not None
    assert (r.link_rate_bytes_s <= r.link_capacity_bytes_s * (1 + 1e-9)).all()  # capacity
    expected = np.zeros(len(topo.capacity_bytes_s))
    for f in flows:
        for link in set(f.path):
            expected[link] += f.size_bytes
    np.testing.assert_allclose(r.link_bytes, expected, rtol=1e-6, atol=1e-3)  # conservation
    assert (r.finish_s > r.start_s).all()  # causality
    return r


@pytest.fixture
def simulated_phase() -> Callable[..., Any]:
    """``simulated_phase(topo, flows)``: one phase through the flow engine, its result after the invariants every
    phase must keep (no link over its capacity, each link carrying the bytes of the flows crossing it, every flow
    finishing after it starts)."""
    return _simulated_phase


def netns_works() -> bool:
    """Root with iproute2's ``ip netns``: what the emulated cluster's tests need."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return False
    return subprocess.run(["ip", "netns", "list"], capture_output=True).returncode == 0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``netns`` are skipped where network namespaces cannot be made (not root, no iproute2)."""
    if not any("netns" in item.keywords for item in items) or netns_works():
        return
    skip = pytest.mark.skip(reason="needs root and ip netns")
    for item in items:
        if "netns" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs (root only): a real ENOSPC."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
