"""Resharding: byte-equal round trip, shard sizes, atomic writes, resume after a failure, and every bad input
through the CLI (exit 2, the field and value named, nothing written)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slowlink.cli.main import app
from slowlink.errors import SpecError
from slowlink.storage import reshard as rs
from slowlink.storage.samples import SourceFile, name_bytes, scan

runner = CliRunner()


def _dataset(root: Path, n: int = 40, size: int = 3000) -> Path:
    for i in range(n):
        d = root / "src" / f"d{i % 3}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:03d}.{'jpg' if i % 2 else 'cls'}").write_bytes(bytes([i % 251]) * (size + i))
    (root / "src" / ".hidden").write_bytes(b"skipped")
    return root / "src"


def test_round_trip_is_byte_equal_and_indexed(tmp_path: Path) -> None:
    src = _dataset(tmp_path)
    res = rs.reshard(src, tmp_path / "dst", 16 * 1024)
    files = rs.list_files(src)
    assert res.samples == len(files) == 40 and res.verified and res.reused_shards == 0
    index = json.loads((tmp_path / "dst" / rs.INDEX_NAME).read_text())
    assert [s["count"] for s in index["shards"]] and sum(s["count"] for s in index["shards"]) == 40
    got = [data for s in index["shards"] for _, data in rs.iter_shard(tmp_path / "dst" / s["name"])]
    assert got == [(src / rel).read_bytes() for rel in index["files"]]
    assert ".hidden" not in " ".join(index["files"])


def test_shards_stay_within_the_size_and_the_size_model_is_exact(tmp_path: Path) -> None:
    src = _dataset(tmp_path, n=60)
    limit = 20 * 1024
    rs.reshard(src, tmp_path / "dst", limit)
    samples = scan(src).samples
    for s in rs.load_index(tmp_path / "dst")["shards"]:
        size = (tmp_path / "dst" / s["name"]).stat().st_size
        members = sum(rs.sample_member_bytes(samples[i]) for i in range(s["first"], s["first"] + s["count"]))
        assert size == rs.tar_file_bytes(members)
        assert size <= limit or s["count"] == 1


def test_a_sample_larger_than_the_shard_gets_its_own_shard(tmp_path: Path) -> None:
    src = _dataset(tmp_path, n=5, size=50_000)
    res = rs.reshard(src, tmp_path / "dst", 1000)
    assert res.shards == 5


def test_failure_leaves_no_partial_file_and_a_rerun_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = _dataset(tmp_path)
    dst = tmp_path / "dst"
    real = rs._read_source
    calls = {"n": 0}

    def flaky(s: Path, f: SourceFile) -> bytes:
        calls["n"] += 1
        if calls["n"] == 25:
            raise SpecError("disk gone")
        return real(s, f)

    monkeypatch.setattr(rs, "_read_source", flaky)
    with pytest.raises(SpecError, match="disk gone"):
        rs.reshard(src, dst, 16 * 1024)
    names = sorted(p.name for p in dst.iterdir())
    assert names and all(n.startswith("shard-") and n.endswith(".tar") for n in names), names
    monkeypatch.setattr(rs, "_read_source", real)
    res = rs.reshard(src, dst, 16 * 1024)
    assert res.reused_shards == len(names) and res.shards > len(names)


def test_a_corrupted_shard_is_rewritten(tmp_path: Path) -> None:
    src = _dataset(tmp_path)
    dst = tmp_path / "dst"
    first = rs.reshard(src, dst, 16 * 1024)
    shard = dst / rs.SHARD_NAME.format(1)
    shard.write_bytes(shard.read_bytes()[:3000])
    again = rs.reshard(src, dst, 16 * 1024)
    assert again.reused_shards == first.shards - 1
    samples = scan(src).samples
    assert rs.shard_matches(shard, src, samples, rs.plan_shards(samples, 16 * 1024)[1])


def test_cli_json_contract(tmp_path: Path) -> None:
    src = _dataset(tmp_path)
    res = runner.invoke(app, ["reshard", str(src), str(tmp_path / "dst"), "--shard-size", "16KiB", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["samples"] == 40 and data["shards"] >= 2 and data["verified"] is True


@pytest.mark.parametrize("size, needles", [("0", ("--shard-size ('0')", "must be > 0")),
                                           ("0GB", ("--shard-size ('0')", "must be > 0")),
                                           ("big", ("--shard-size ('big')", "is not a size"))])
def test_cli_bad_shard_size_writes_nothing(tmp_path: Path, size: str, needles: tuple[str, ...],
                                           cli_fails: Callable[..., str]) -> None:
    src = _dataset(tmp_path)
    cli_fails(["reshard", str(src), str(tmp_path / "dst"), "--shard-size", size], *needles)
    assert not (tmp_path / "dst").exists()


def test_cli_missing_empty_and_nested_dirs(tmp_path: Path, cli_fails: Callable[..., str]) -> None:
    cli_fails(["reshard", str(tmp_path / "nope"), str(tmp_path / "dst")], "SRC", "nope", "does not exist")
    (tmp_path / "empty" / ".only-hidden").mkdir(parents=True)
    cli_fails(["reshard", str(tmp_path / "empty"), str(tmp_path / "dst")], "SRC", "empty", "holds no file")
    src = _dataset(tmp_path)
    cli_fails(["reshard", str(src), str(src / "out")], "DST", "must lie outside SRC")
    (tmp_path / "afile").write_text("x")
    cli_fails(["reshard", str(src), str(tmp_path / "afile")], "DST", "is not a directory")
    assert not (tmp_path / "dst").exists() and not (src / "out").exists()


def test_a_rerun_with_larger_shards_removes_the_shards_no_index_lists(tmp_path: Path) -> None:
    src = _dataset(tmp_path)
    dst = tmp_path / "dst"
    small = rs.reshard(src, dst, 16 * 1024)
    (dst / "mine.tar").write_bytes(b"not ours")
    big = rs.reshard(src, dst, 1 << 20)
    assert big.shards == 1 < small.shards
    assert sorted(p.name for p in dst.iterdir()) == ["index.json", "mine.tar", "shard-000000.tar"]


def _paired(root: Path, n: int = 30) -> Path:
    """Images with their labels (and every third with a mask of a two-dot extension), in three folders."""
    src = root / "pairs"
    for i in range(n):
        d = src / f"part{i % 3}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"img{i:05d}.jpg").write_bytes(bytes([i]) * (2000 + 37 * i))
        (d / f"img{i:05d}.txt").write_text(f"label {i % 7}")
        if i % 3 == 0:
            (d / f"img{i:05d}.seg.png").write_bytes(b"m" * (100 + i))
    return src


def test_the_files_of_one_key_are_one_sample_that_webdataset_reads_whole(tmp_path: Path) -> None:
    import webdataset as wds

    src = _paired(tmp_path)
    res = rs.reshard(src, tmp_path / "dst", 24 * 1024)
    assert res.samples == 30 and res.files == 70 and res.shards >= 3 and res.skipped == ()
    index = rs.load_index(tmp_path / "dst")
    urls = [str(tmp_path / "dst" / s["name"]) for s in index["shards"]]
    got = list(wds.WebDataset(urls, shardshuffle=False, empty_check=False))
    assert [s["__key__"] for s in got] == sorted(f"part{i % 3}/img{i:05d}" for i in range(30))
    for s in got:
        i = int(s["__key__"][-5:])
        assert s["jpg"] == bytes([i]) * (2000 + 37 * i) and s["txt"] == f"label {i % 7}".encode()
        assert ("seg.png" in s) == (i % 3 == 0)
    assert sum(s["count"] for s in index["shards"]) == 30
    assert sum(s["file_count"] for s in index["shards"]) == len(index["files"]) == 70


def test_files_no_loader_could_use_are_skipped_and_named(tmp_path: Path) -> None:
    import os

    src = _paired(tmp_path, n=3)
    outside = tmp_path / "secret.jpg"
    outside.write_bytes(b"not in SRC")
    (src / "leak.jpg").symlink_to(outside)
    (src / "gone.jpg").symlink_to(tmp_path / "missing.jpg")
    (src / "inside.jpg").symlink_to(src / "part0" / "img00000.jpg")
    os.mkfifo(src / "pipe.jpg")
    (src / "README").write_text("no extension")
    (src / "part0" / "img00000.JPG").write_bytes(b"upper")
    (src / ".git").mkdir()
    (src / ".git" / "config").write_text("x")
    res = rs.reshard(src, tmp_path / "dst", 1 << 20)
    reasons = {s.rel: s.reason for s in res.skipped}
    assert set(reasons) == {"leak.jpg", "gone.jpg", "pipe.jpg", "README", "part0/img00000.jpg", ".git/"}
    assert "outside SRC" in reasons["leak.jpg"] and "broken symlink" in reasons["gone.jpg"]
    assert "fifo" in reasons["pipe.jpg"] and "no extension" in reasons["README"]
    assert "lowercases" in reasons["part0/img00000.jpg"] and "hidden" in reasons[".git/"]
    assert res.samples == 4  # three pairs and the symlink inside SRC
    index = rs.load_index(tmp_path / "dst")
    assert {s["name"] for s in index["skipped"]} == set(reasons)
    assert b"not in SRC" not in (tmp_path / "dst" / "shard-000000.tar").read_bytes()


def test_a_name_that_is_not_utf8_is_stored_reversibly(tmp_path: Path) -> None:
    import os

    src = tmp_path / "src"
    src.mkdir()
    raw = b"caf\xe9.jpg"
    with open(os.path.join(os.fsencode(src), raw), "wb") as fh:
        fh.write(b"latin-1 name")
    (src / "plain.jpg").write_bytes(b"plain")
    rs.reshard(src, tmp_path / "dst", 1 << 20)
    index = rs.load_index(tmp_path / "dst")
    assert [name_bytes(e) for e in index["files"]] == [raw, b"plain.jpg"]
    assert index["files"][0] == {"hex": raw.hex()}
    (name, data), _ = list(rs.iter_shard(tmp_path / "dst" / "shard-000000.tar"))
    assert os.fsencode(name) == raw and data == b"latin-1 name"


def test_a_killed_runs_partial_is_removed_by_the_next_run(tmp_path: Path) -> None:
    import subprocess
    import sys

    src = _dataset(tmp_path)
    dst = tmp_path / "dst"
    dst.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    partial = dst / f".shard-000003.tar.partial-{int(dead.stdout)}"
    partial.write_bytes(b"half a shard")
    res = rs.reshard(src, dst, 16 * 1024)
    assert res.removed_partials == 1 and not partial.exists()
    assert not [p for p in dst.iterdir() if ".partial-" in p.name]


def test_cli_json_names_the_target_size_the_bytes_written_and_the_skipped(tmp_path: Path) -> None:
    src = _paired(tmp_path, n=6)
    (src / "NOTES").write_text("x")
    res = runner.invoke(app, ["reshard", str(src), str(tmp_path / "dst"), "--shard-size", "16KiB", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["shard_size_bytes"] == 16 * 1024
    assert data["bytes_written"] == sum(p.stat().st_size for p in (tmp_path / "dst").glob("shard-*.tar"))
    assert data["skipped"] == [{"name": "NOTES", "reason": data["skipped"][0]["reason"]}]
    assert data["samples"] == 6 and data["files"] == 14
    text = runner.invoke(app, ["reshard", str(src), str(tmp_path / "dst"), "--shard-size", "16KiB"])
    assert text.exit_code == 0 and "1 files skipped (NOTES" not in text.output and "has no extension" in text.output


def test_cli_src_with_nothing_usable_creates_nothing(tmp_path: Path, cli_fails: Callable[..., str]) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "README").write_text("x")
    cli_fails(["reshard", str(src), str(tmp_path / "out" / "dst")], "SRC", "holds no files a webdataset reader")
    assert not (tmp_path / "out").exists()


def test_cli_a_full_disk_is_one_message_with_its_own_exit_code(tmp_path: Path, full_disk: Path) -> None:
    src = _dataset(tmp_path, n=40, size=30_000)  # 1.2 MB into 256 KiB
    res = runner.invoke(app, ["reshard", str(src), str(full_disk / "dst"), "--shard-size", "64KiB"])
    assert res.exit_code == 74, res.output
    assert "Traceback" not in res.output and "no space left on the device (ENOSPC)" in res.output
    assert len(res.output.strip().splitlines()) <= 2, res.output
    assert not [p for p in (full_disk / "dst").iterdir() if ".partial-" in p.name]


def test_cli_permission_denied_is_one_message_with_its_own_exit_code(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    src = _dataset(tmp_path, n=3)

    def refuse(self: Path, *a: object, **k: object) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", str(self))

    monkeypatch.setattr(Path, "mkdir", refuse)
    res = runner.invoke(app, ["reshard", str(src), str(tmp_path / "dst")])
    assert res.exit_code == 74 and "permission denied (EACCES)" in res.output and "Traceback" not in res.output
