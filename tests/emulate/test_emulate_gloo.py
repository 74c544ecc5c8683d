"""gloo all_reduce across the emulated namespaces (root + torch): it runs and respects the wire bound."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from slowlink import units
from slowlink.emulate import net
from slowlink.emulate.measure import collective
from slowlink.emulate.plan import build_plan
from slowlink.spec.cluster import load_cluster


def _netns_works() -> bool:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return False
    return subprocess.run(["ip", "netns", "list"], capture_output=True).returncode == 0


EX = Path(__file__).parents[2] / "examples"
pytestmark = [pytest.mark.netns, pytest.mark.torch,
              pytest.mark.skipif(not _netns_works(), reason="needs root and ip netns"),
              pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")]
SIZE = 2 * units.MiB


def test_all_reduce_runs_on_the_tree() -> None:
    plan = net.up(build_plan(load_cluster(EX / "emulate-2leaf.yaml")))
    try:
        t = min(collective(plan, "all_reduce", SIZE, iters=2))
    finally:
        net.down(plan.run_id)
    # Ring all_reduce wire bound: 2 (n-1)/n S / node rate.
    assert t >= 2 * 3 / 4 * SIZE / plan.node_rate_bytes_s * 0.95
