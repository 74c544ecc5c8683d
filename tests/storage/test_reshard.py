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
    files = rs.list_files(src)
    for s in rs.load_index(tmp_path / "dst")["shards"]:
        size = (tmp_path / "dst" / s["name"]).stat().st_size
        members = sum(rs.tar_member_bytes(files[i].size_bytes) for i in range(s["first"], s["first"] + s["count"]))
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

    def flaky(s: Path, f: rs.SourceFile) -> bytes:
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
    assert rs.shard_matches(shard, src, rs.list_files(src), rs.plan_shards(rs.list_files(src), 16 * 1024)[1])


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
    cli_fails(["reshard", str(tmp_path / "empty"), str(tmp_path / "dst")], "SRC", "empty", "holds no files")
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
