"""A checkpoint burst slows a concurrent all_reduce on a converged fabric, not on a separate one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from slowlink import units
from slowlink.errors import SpecError
from slowlink.sim.checkpoint import checkpoint_flows
from slowlink.sim.scenario import load_scenario, run_scenario
from slowlink.spec.cluster import Cluster
from slowlink.topology.build import build

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _times(mode: str) -> dict[str, tuple[float, float]]:
    spec, cluster = load_scenario(EXAMPLES / f"scenario-ckpt-{mode}.yaml")
    return {t.name: (t.duration_s, t.alone_s) for t in run_scenario(spec, cluster).traffic}


def test_converged_burst_slows_the_ring_by_what_the_shared_nic_implies() -> None:
    # 16 nodes write 4 GB each to 4 targets of 50 GB/s: 12.5 GB/s per node while the burst lasts (320 ms,
    # longer than the ring). Each node's one NIC uplink carries the ring's crossing flow and the node's
    # write, so max-min leaves the ring nic - 12.5 GB/s: the network-bound ring slows by nic / (nic - 12.5)
    # (its latency share, ~1%, is not slowed).
    _, cluster = load_scenario(EXAMPLES / "scenario-ckpt-converged.yaml")
    nic = cluster.compute_nics.speed_bytes_s * cluster.fabric.transport.efficiency
    expected = nic / (nic - 200 * units.GB / 16)
    dur, alone = _times("converged")["grad-allreduce"]
    assert abs(dur / alone - expected) / expected < 0.02


def test_separate_storage_fabric_leaves_the_ring_alone() -> None:
    dur, alone = _times("separate")["grad-allreduce"]
    assert abs(dur - alone) / alone < 1e-9


def test_checkpoint_needs_storage_in_the_cluster(make_cluster: Callable[..., Cluster]) -> None:
    c = make_cluster(nodes=2, gpn=1, nics=1)
    with pytest.raises(SpecError, match="storage"):
        checkpoint_flows(build(c), 2, units.GB)
