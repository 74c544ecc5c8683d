"""A checkpoint burst slows a concurrent ring step on a converged fabric, not on a separate one."""

from __future__ import annotations

import numpy as np

from slowlink import units
from slowlink.sim.collectives import ring_step_flows
from slowlink.sim.engine import simulate
from slowlink.spec.cluster import cluster_from_mapping
from slowlink.topology.fabric import build
from slowlink.topology.storage import add_storage, checkpoint_flows


def _cluster(shared: bool) -> object:
    return cluster_from_mapping({
        "name": "t", "nodes": 8, "gpus_per_node": 1, "gpu": "h100-sxm",
        "scale_up": {"link": "nvlink4", "domain_gpus": 1},
        "nics": {"compute": {"per_node": 1, "speed_gbit_s": 400},
                 "storage": {"per_node": 1, "speed_gbit_s": 400}},
        "fabric": {"transport": "infiniband", "tiers": 2, "routing": "adaptive"},
        "storage": {"system": "parallel-fs", "shared_with_compute": shared, "read_gbyte_s": 400,
                    "write_gbyte_s": 400, "metadata_ops_s": 1e5, "targets": 8},
    })


def _ring_time(shared: bool, burst: bool) -> float:
    c = _cluster(shared)
    topo = build(c, nics_per_leaf=2, spines=2)  # type: ignore[arg-type]
    add_storage(topo, c)  # type: ignore[arg-type]
    ring = ring_step_flows(topo, list(range(8)), 64 * units.MiB)
    flows = ring + (checkpoint_flows(topo, 8, 4 * units.GB) if burst else [])
    r = simulate(topo.capacity_bytes_s, topo.latency_s, flows)
    assert r.link_rate_bytes_s is None or (r.link_rate_bytes_s <= r.link_capacity_bytes_s * 1.000001).all()
    return float(np.max(r.finish_s[: len(ring)]))


def test_converged_burst_slows_the_ring_by_what_the_shared_nic_implies() -> None:
    # The 8 checkpoint writes are bound by the storage leaf's 2 spine links (2 x 50 GB/s / 8 = 12.5 GB/s
    # each); each node's NIC uplink carries one checkpoint write and one ring flow, so max-min leaves the
    # ring nic - 12.5 GB/s: its step slows by nic / (nic - 12.5 GB/s) (latency is ~1% of the step).
    c = _cluster(True)
    nic = c.compute_nics.speed_bytes_s * c.fabric.transport.efficiency  # type: ignore[attr-defined]
    ckpt = 2 * 50 * units.GB / 8
    expected = nic / (nic - ckpt)
    slow, base = _ring_time(True, True), _ring_time(True, False)
    assert abs(slow / base - expected) / expected < 0.05


def test_separate_storage_fabric_leaves_the_ring_alone() -> None:
    assert abs(_ring_time(False, True) - _ring_time(False, False)) < 1e-12
