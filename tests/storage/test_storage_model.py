"""The storage model's formulas: checkpoint size, writers, write/restore/async times, capacity, data stall."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from slowlink import units
from slowlink.spec.cluster import Cluster, cluster_from_mapping, load_cluster
from slowlink.spec.storage import Checkpoint, Data
from slowlink.spec.workload import Workload, load_workload
from slowlink.storage.capacity import checkpoints_that_fit, time_until_full_s
from slowlink.storage.checkpoint import (
    bytes_per_param_parts,
    checkpoint_cost,
    checkpoint_restore_time_s,
    checkpoint_size,
    checkpoint_write_time_s,
    rank_bytes,
)
from slowlink.storage.plan import StoragePlan, plan_storage
from slowlink.storage.read import data_feed, read_time_s, samples_per_s_at_utilisation
from slowlink.workload.flops import params
from slowlink.workload.memory import kept_bytes, optimizer_state_bytes
from slowlink.workload.step import WAIT_SHARE, fit_dp, plan

EX = Path(__file__).parents[2] / "examples"


def _cluster(**storage: Any) -> Cluster:
    st = {"system": "parallel-fs", "read_gbyte_s": 64, "write_gbyte_s": 64, "metadata_ops_s": 1e5, **storage}
    return cluster_from_mapping({
        "name": "c", "nodes": 8, "gpus_per_node": 8, "gpu": "h100-sxm", "scale_up": {"link": "nvlink4"},
        "nics": {"compute": {"per_node": 1, "speed_gbit_s": 400}, "storage": {"per_node": 1, "speed_gbit_s": 400}},
        "fabric": {"transport": "infiniband"}, "storage": st})


def _w(**changes: Any) -> Workload:
    w = load_workload(EX / "llama3-8b.yaml")
    p = changes.pop("parallel", {})
    return replace(w, parallel=replace(w.parallel, **p), **changes)


def test_bytes_per_param_come_from_the_memory_tables() -> None:
    for precision in ("bf16", "fp32"):
        parts = bytes_per_param_parts(precision)
        assert parts == {"weights": kept_bytes(precision), "optimizer": optimizer_state_bytes(precision)}
    assert sum(bytes_per_param_parts("bf16").values()) == 14.0  # mixed-precision Adam: 2 + 4 + 4 + 4
    assert sum(bytes_per_param_parts("bf16", "fp32", save_optimizer=False).values()) == 4.0


def test_size_is_params_times_bytes_and_zero_does_not_change_it() -> None:
    w = _w()
    n = sum(params(w.model))
    assert checkpoint_size(w).total_bytes == pytest.approx(14.0 * n)
    for zero in (0, 1, 3):
        assert checkpoint_size(_w(parallel={"zero": zero})).total_bytes == pytest.approx(14.0 * n)
    weights_only = _w(checkpoint=Checkpoint.of(interval_steps=1, save_optimizer=False))
    assert checkpoint_size(weights_only).total_bytes == pytest.approx(2.0 * n)


@pytest.mark.parametrize(("zero", "layout", "writers"), [(0, "sharded", 2), (1, "sharded", 64), (3, "sharded", 64),
                                                         (1, "gathered", 1)])
def test_who_writes(zero: int, layout: str, writers: int) -> None:
    w = _w(parallel={"zero": zero})  # tp 2, dp 32: without ZeRO only the first replica's 2 ranks write
    size = checkpoint_size(w)
    write, read = rank_bytes(w, size, layout)
    assert int((write > 0).sum()) == writers
    assert write.sum() == pytest.approx(size.total_bytes)  # every byte is written exactly once
    assert read.sum() >= size.total_bytes - 1  # replicas read the same bytes again at restore


def test_write_and_restore_times_take_the_slower_of_clients_and_storage() -> None:
    assert checkpoint_write_time_s(100e9, 4, 10e9, 1e12) == pytest.approx(2.5)  # clients bind: 25 GB / 10 GB/s
    assert checkpoint_write_time_s(100e9, 100, 10e9, 50e9) == pytest.approx(2.0)  # storage binds
    assert checkpoint_restore_time_s(1e12, 10, 5e9, 1e15) == pytest.approx(20.0)


def test_per_client_limit_slows_the_write() -> None:
    w = _w()
    fast = checkpoint_cost(w, _cluster(), 1.0)
    slow = checkpoint_cost(w, _cluster(per_client_write_gbyte_s=1), 1.0)
    assert slow.write_s > fast.write_s
    assert slow.binding == "client"
    assert slow.write_s == pytest.approx(slow.node_bytes / units.GB)


def test_async_blocks_for_the_copy_and_drains_in_the_background() -> None:
    spec = Checkpoint.of(interval_steps=10, mode="async", host_staging_gib=1)
    ck = checkpoint_cost(_w(checkpoint=spec), _cluster(), 7.0)
    assert ck.blocking_s < ck.write_s
    assert ck.drain_s == ck.write_s
    assert ck.host_fits is False  # a node stages ~26 GiB
    assert ck.drain_fits is True  # 1.8 s drain, 70 s interval
    assert ck.overhead_per_step_s(7.0) == pytest.approx(ck.blocking_s / 10)
    sync = checkpoint_cost(_w(checkpoint=replace(spec, mode="sync")), _cluster(), 7.0)
    assert sync.overhead_per_step_s(7.0) == pytest.approx(sync.write_s / 10)


def test_a_drain_longer_than_the_interval_makes_the_next_checkpoint_wait() -> None:
    spec = Checkpoint.of(interval_steps=1, mode="async")
    ck = checkpoint_cost(_w(checkpoint=spec), _cluster(write_gbyte_s=1), 1.0)
    assert ck.drain_fits is False
    assert ck.overhead_per_step_s(1.0) == pytest.approx(ck.blocking_s + ck.drain_s - 1.0)


def test_capacity_and_time_until_full() -> None:
    assert checkpoints_that_fit(10e12, 1e12, dataset_bytes=2.5e12) == 7
    assert time_until_full_s(7, 3, None, 60.0) is None  # a rolling window never fills
    assert time_until_full_s(7, 3, 10, 60.0) == pytest.approx(5 * 10 * 60.0)
    assert time_until_full_s(2, 3, 10, 60.0) == 0.0


def test_tiers_and_retention_reach_the_plan() -> None:
    c = load_cluster(EX / "ref-64gpu-storage.yaml")
    w = fit_dp(load_workload(EX / "llama3-8b-storage.yaml"), c)
    sp = plan_storage(w, c, plan(w, c))
    assert sp.capacity is not None and sp.capacity.tier == "hot"
    assert sp.capacity.fit == int(2e12 // sp.size.total_bytes)  # dataset on the capacity tier, not here
    assert sp.capacity.full_after_s is not None and sp.capacity.full_after_s > 0


def test_read_time_is_bandwidth_or_metadata_bound() -> None:
    assert read_time_s(1000, 1e9, 10e9, 1e6) == pytest.approx(100.0)
    assert read_time_s(1e6, 1e3, 10e9, 1e4) == pytest.approx(100.0)
    assert samples_per_s_at_utilisation(7, 0.323, 0.9) == pytest.approx(0.9 * 7 / 0.323)


def test_small_files_stall_on_metadata_where_shards_do_not() -> None:
    c = _cluster(metadata_ops_s=100)
    data = Data.of(bytes_per_sample="100KB", layout="files")
    files = data_feed(_w(data=data), c, 1.0)
    shards = data_feed(_w(data=replace(data, layout="shards")), c, 1.0)
    assert files.binding == "metadata" and files.stall_s == pytest.approx(512 / 100 - 1.0)
    assert shards.stall_s == 0.0


def test_stall_follows_the_slowest_supply_and_not_the_rule_of_thumb() -> None:
    w = _w(data=Data.of(bytes_per_sample="32MB"))
    slow = data_feed(w, _cluster(read_gbyte_s=2), 7.0)
    assert slow.binding == "storage" and slow.stall_s == pytest.approx(512 * 32e6 / 2e9 - 7.0)
    assert data_feed(w, _cluster(), 7.0).stall_s == 0.0
    assert slow.rule_of_thumb_bytes_s == 64 * units.GB  # shown for comparison only


def test_storage_is_named_above_the_step_models_wait_share() -> None:
    feed = data_feed(_w(data=Data.of(bytes_per_sample="32MB")), _cluster(read_gbyte_s=2), 1.0)
    for share, named in ((0.99 * WAIT_SHARE, False), (1.01 * WAIT_SHARE, True)):
        stall = share / (1.0 - share)  # ``share`` of the step as it runs, the stall included
        stalled = replace(feed, supply_s={"storage": 1.0 + stall})
        sp = StoragePlan(1.0, 0.0, stalled, checkpoint_size(_w()), None, None)
        assert sp.dominates is named


def test_converged_storage_uses_the_compute_nics() -> None:
    w = _w(data=Data.of(bytes_per_sample="1GB"))
    sep = data_feed(w, _cluster(read_gbyte_s=1e4), 1.0)
    conv = data_feed(w, _cluster(read_gbyte_s=1e4, shared_with_compute=True), 1.0)
    assert sep.supply_s["client NICs"] == pytest.approx(conv.supply_s["client NICs"])  # both 1 x 400G here
    limited = data_feed(w, _cluster(read_gbyte_s=1e4, per_client_read_gbyte_s=1), 1.0)
    assert limited.supply_s["client NICs"] == pytest.approx(512e9 / (8 * 1e9))


def test_checkpoint_burst_slows_gradient_sync_only_when_converged() -> None:
    from slowlink.storage.converged import checkpoint_slowdown

    conv = checkpoint_slowdown(load_cluster(EX / "fat2-ckpt-converged.yaml"), 4e9, float(2**30))
    sep = checkpoint_slowdown(load_cluster(EX / "fat2-ckpt-separate.yaml"), 4e9, float(2**30))
    assert conv.slowdown > 1.05
    assert sep.slowdown == pytest.approx(1.0)
    assert conv.alone_s == pytest.approx(sep.alone_s)


def test_a_sealed_checkpoints_digest_blocks_the_step_only_in_sync_mode() -> None:
    from slowlink.storage.checkpoint import SHA256_BYTES_S_PER_CORE, digest_time_s, sealed_times

    d = digest_time_s(3.56e9)
    assert d == pytest.approx(3.56e9 / SHA256_BYTES_S_PER_CORE) == pytest.approx(2.0)
    assert sealed_times("sync", 10.0, 10.0, 0.0, 8.0, d) == (12.0, 0.0, 10.0)
    assert sealed_times("async", 10.0, 0.5, 10.0, 8.0, d) == (0.5, 12.0, 10.0)
