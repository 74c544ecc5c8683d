"""``slowlink bench storage`` on a few hundred files: every sample read in both layouts, the page cache left
empty, the model's prediction beside each row, and every bad input (exit 2, field and value named)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slowlink.bench import pagecache
from slowlink.bench.storage import StorageBenchConfig, run_storage
from slowlink.bench.storage_data import MARKER, make_dataset
from slowlink.cli.main import app
from slowlink.errors import SpecError

pytest.importorskip("torch")
runner = CliRunner()
SMALL = ["--probe-size", "2MiB", "--probe-files", "50", "--shard-size", "256KiB", "--no-results"]


def test_make_dataset_is_seeded_and_reused(tmp_path: Path) -> None:
    assert make_dataset(tmp_path / "a", 30, 100, seed=1)
    assert not make_dataset(tmp_path / "a", 30, 100, seed=1)  # the same dataset: nothing rewritten
    make_dataset(tmp_path / "b", 30, 100, seed=1)
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*.bin"))
    assert len(files) == 30
    assert all((tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes() for f in files)
    with pytest.raises(SpecError, match="must be absent or empty"):
        make_dataset(tmp_path / "a", 31, 100, seed=1)


def test_fadvise_empties_the_cache_of_a_file(tmp_path: Path) -> None:
    p = tmp_path / "f"
    p.write_bytes(b"x" * 65536)
    p.read_bytes()
    assert pagecache.resident_fraction([p]) > 0
    pagecache.evict([p])
    assert pagecache.resident_fraction([p]) == 0


def test_every_sample_is_read_from_disk_in_both_layouts(tmp_path: Path) -> None:
    make_dataset(tmp_path / "data", 300, 4096)
    cfg = StorageBenchConfig(workers=2, batch=16, shard_bytes=256 * 1024, probe_bytes=2**20, probe_files=50)
    res = run_storage(tmp_path / "data", tmp_path / "shards", cfg)
    rows = {(r["layout"], r["order"]): r for r in res.rows}
    assert set(rows) == {(lay, o) for lay in ("files", "shards") for o in ("sequential", "shuffled")}
    for r in rows.values():
        assert r["samples"] == 300 and r["bytes"] == 300 * 4096
        assert r["resident_after"] == 0.0  # the reads left nothing in the page cache
        assert r["files_per_s"] > 0 and r["mbyte_s"] > 0 and r["predicted_s"] > 0
    assert rows["files", "sequential"]["files_opened"] == 300
    assert rows["shards", "sequential"]["files_opened"] == res.shard_count < 300
    assert not any(p.name.startswith(".slowlink-probe") for p in (tmp_path / "shards").iterdir())


def test_cli_json_rows_carry_the_contract(tmp_path: Path) -> None:
    res = runner.invoke(app, ["bench", "storage", str(tmp_path / "d"), "--make", "120", "--file-size", "2KiB",
                              "--workers", "0", "--order", "sequential", "--json", *SMALL])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [r["layout"] for r in rows] == ["files", "shards"]
    assert all({"files_per_s", "mbyte_s", "layout", "predicted_files_per_s"} <= set(r) for r in rows)
    assert (tmp_path / "d" / MARKER).is_file() and (tmp_path / "d-shards" / "index.json").is_file()


def _bench(args: list[str]) -> list[str]:
    return ["bench", "storage", *args, *SMALL]


def test_cli_bad_inputs(tmp_path: Path, cli_fails: Callable[..., str]) -> None:
    cli_fails(_bench([str(tmp_path / "nope")]), "SRC", "nope", "does not exist")
    (tmp_path / "empty").mkdir()
    cli_fails(_bench([str(tmp_path / "empty")]), "SRC", "holds no files")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "mine.txt").write_text("keep")
    cli_fails(_bench([str(tmp_path / "busy"), "--make", "10"]), "DIR", "must be absent or empty")
    cli_fails(_bench([str(tmp_path / "x"), "--make", "0"]), "--make (0)", "must be >= 1")
    cli_fails(_bench([str(tmp_path / "x"), "--make", "5", "--file-size", "0"]), "--file-size (0)", "must be >= 1")
    cli_fails(_bench([str(tmp_path / "busy"), "--cache", "cold"]), "--cache ('cold')", "fadvise, drop, none")
    cli_fails(_bench([str(tmp_path / "busy"), "--workers", "-1"]), "--workers (-1)", "must be >= 0")
    cli_fails(_bench([str(tmp_path / "busy"), "--order", "random"]), "--order ('random')", "sequential, shuffled")
    res = runner.invoke(app, ["bench", "storage", str(tmp_path / "busy"), "--shard-size", "0", "--no-results"])
    assert res.exit_code == 2 and "--shard-size (0.0)" in res.output and "must be > 0" in res.output, res.output
    assert (tmp_path / "busy" / "mine.txt").read_text() == "keep"
    assert not (tmp_path / "x").exists() and not (tmp_path / "busy-shards").exists()


def _record(path: Path, kind: str, rows: list[dict[str, object]]) -> Path:
    path.write_text(json.dumps({"kind": kind, "env": {}, "config": {}, "rows": rows}))
    return path


def test_compare_reads_storage_and_checkpoint_records(tmp_path: Path) -> None:
    read = {"layout": "files", "order": "sequential", "workers": 2, "files_per_s": 10_000.0, "mbyte_s": 160.0}
    base = _record(tmp_path / "a.json", "storage", [read])
    slow = _record(tmp_path / "b.json", "storage", [{**read, "files_per_s": 5_000.0}])
    assert runner.invoke(app, ["compare", str(base), str(base)]).exit_code == 0
    res = runner.invoke(app, ["compare", str(base), str(slow)])
    assert res.exit_code == 1 and "read files sequential w2" in res.output, res.output
    ck = {"mode": "async", "ranks": 2, "blocking_s": 0.1, "drain_s": 1.0, "restore_s": 0.5}
    a = _record(tmp_path / "c.json", "checkpoint", [ck])
    b = _record(tmp_path / "d.json", "checkpoint", [{**ck, "blocking_s": 0.3}])
    assert runner.invoke(app, ["compare", str(a), str(b)]).exit_code == 1
    bad = _record(tmp_path / "e.json", "storage", [{**read, "files_per_s": -1.0}])
    res = runner.invoke(app, ["compare", str(base), str(bad)])
    assert res.exit_code == 2 and "files_per_s" in res.output, res.output


def test_a_shard_directory_is_read_as_its_samples(tmp_path: Path) -> None:
    from slowlink.storage.reshard import reshard

    src = tmp_path / "pairs"
    src.mkdir()
    for i in range(40):
        (src / f"s{i:03d}.jpg").write_bytes(b"j" * 3000)
        (src / f"s{i:03d}.cls").write_bytes(b"%d" % (i % 5))
    reshard(src, tmp_path / "shards", 32 * 1024)
    cfg = StorageBenchConfig(workers=0, batch=8, orders=("sequential",), probe_bytes=2**20, probe_files=50)
    res = run_storage(tmp_path / "shards", tmp_path / "unused", cfg)
    [r] = res.rows
    assert r["layout"] == "shards" and r["samples"] == 40 and r["files_opened"] == res.shard_count > 1
    assert r["bytes"] == sum(3000 + len(b"%d" % (i % 5)) for i in range(40))
    assert not (tmp_path / "unused").exists()
