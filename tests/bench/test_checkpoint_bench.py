"""``slowlink bench checkpoint``: sync and async DCP saves and the restore on gloo (one rank in this process,
two through the launcher), the prediction beside every row, and every bad option (exit 2, field and value)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slowlink.bench import launch
from slowlink.bench.checkpoint import CheckpointBenchConfig, HostProbe, checkpoint_rank, finish_rows, make_state
from slowlink.cli.main import app

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
runner = CliRunner()


@pytest.fixture
def one_rank() -> Iterator[launch.RankContext]:
    ctx = launch.init_rank("gloo", 60.0, rank=0, world=1, addr="127.0.0.1", port=launch.free_port())
    yield ctx
    dist.destroy_process_group()


def test_state_is_sharded_by_rank_and_sized() -> None:
    a, b = make_state(0, 2**20), make_state(1, 2**20)
    assert not set(a) & set(b)
    assert sum(t.numel() * 4 for t in a.values()) == 2**20


def test_sync_and_async_save_and_restore_on_one_rank(one_rank: launch.RankContext, tmp_path: Path) -> None:
    cfg = CheckpointBenchConfig(state_bytes=2**20, repeat=1, directory=str(tmp_path))
    res = checkpoint_rank(cfg, one_rank)
    rows = {r["mode"]: r for r in res.rows}
    assert set(rows) == {"sync", "async"}
    assert rows["sync"]["drain_s"] == 0.0 and rows["sync"]["blocking_s"] > 0
    assert rows["async"]["blocking_s"] > 0 and rows["async"]["drain_s"] > 0
    assert all(r["restore_s"] > 0 for r in rows.values())
    assert list(tmp_path.iterdir()) == []  # the checkpoints were removed


def test_prediction_follows_the_storage_model() -> None:
    # 2 ranks x 50 MB = 100 MB; one core: the two ranks' torch.save passes (CRC-32) take turns on it
    probe = HostProbe(write_bytes_s=100e6, read_bytes_s=200e6, copy_bytes_s=1e9, serialize_bytes_s=400e6, cores=1)
    cfg = CheckpointBenchConfig(state_bytes=50_000_000)
    rows = finish_rows([{"mode": "sync", "ranks": 2, "blocking_s": 2.5, "drain_s": 0.0, "restore_s": 0.6},
                        {"mode": "async", "ranks": 2, "blocking_s": 0.1, "drain_s": 1.9, "restore_s": 0.5}], cfg, probe)
    sync, asy = rows
    write = 100e6 / 400e6 + 100e6 / 100e6  # serialize on one core, then the disk
    assert sync["predicted_blocking_s"] == pytest.approx(write) and sync["predicted_drain_s"] == 0.0
    assert asy["predicted_blocking_s"] == pytest.approx(0.05) and asy["predicted_drain_s"] == pytest.approx(write)
    assert sync["predicted_restore_s"] == pytest.approx(0.5 + 0.1) and sync["restore_error"] == pytest.approx(0.0)
    assert sync["write_error"] == pytest.approx(write / 2.5 - 1) and sync["gbyte_s"] == pytest.approx(0.04)


def test_serialization_spreads_over_the_cores_the_ranks_can_use() -> None:
    from slowlink.storage.checkpoint import cpu_time_s, dcp_write_time_s

    assert cpu_time_s(8e9, ranks=8, cores=2, bytes_s_per_core=2e9) == pytest.approx(2.0)
    assert cpu_time_s(8e9, ranks=2, cores=16, bytes_s_per_core=2e9) == pytest.approx(2.0)
    assert cpu_time_s(8e9, ranks=8, cores=16, bytes_s_per_core=2e9) == pytest.approx(0.5)
    assert dcp_write_time_s(8e9, 8, 16, 2e9, storage_time_s=1.0) == pytest.approx(1.5)
    with pytest.raises(ValueError, match="cores"):
        cpu_time_s(1.0, ranks=1, cores=0, bytes_s_per_core=1.0)


@pytest.mark.slow
def test_cli_two_ranks_json_contract(tmp_path: Path) -> None:
    res = runner.invoke(app, ["bench", "checkpoint", "--nproc", "2", "--state-size", "1MiB", "--repeat", "1",
                              "--probe-size", "4MiB", "--dir", str(tmp_path), "--json", "--no-results"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [(r["mode"], r["ranks"]) for r in rows] == [("sync", 2), ("async", 2)]
    assert all({"blocking_s", "drain_s", "restore_s", "mode", "predicted_drain_s"} <= set(r) for r in rows)


@pytest.mark.parametrize("args, needles", [
    (["--nproc", "0"], ("--nproc ('0')", ">= 1")),
    (["--nproc", "two"], ("--nproc ('two')", "comma-separated")),
    (["--state-size", "0"], ("--state-size (0)", "must be >=")),
    (["--state-size", "lots"], ("--state-size ('lots')", "is not a size")),
    (["--mode", "lazy"], ("--mode ('lazy')", "sync, async")),
    (["--repeat", "0"], ("--repeat (0)", ">= 1")),
    (["--dir", "/nonexistent/slowlink"], ("--dir ('/nonexistent/slowlink')", "not an existing directory")),
])
def test_cli_bad_options(args: list[str], needles: tuple[str, ...], cli_fails: Callable[..., str]) -> None:
    cli_fails(["bench", "checkpoint", *args, "--no-results"], *needles)


def test_probes_before_and_after_average_as_time_per_byte() -> None:
    from slowlink.bench.checkpoint import mean_probe

    p = mean_probe(HostProbe(100.0, 200.0, 1.0, 4.0, 2), HostProbe(300.0, 200.0, 3.0, 4.0, 1))
    assert (p.write_bytes_s, p.read_bytes_s, p.copy_bytes_s) == pytest.approx((150.0, 200.0, 1.5))
    assert (p.serialize_bytes_s, p.cores) == (pytest.approx(4.0), 1)
