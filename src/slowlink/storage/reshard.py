"""Resharding a directory of small files into webdataset tar shards, with an index, verified and resumable.

Every regular file under SRC (hidden names skipped, sorted by path) is one sample: key ``i`` (nine digits,
the file's rank in that order) and extension its own (``.bin`` when it has none), written in order into
``shard-NNNNNN.tar`` files of at most ``shard_bytes`` each (a sample larger than that gets a shard of its own).
The tar layout is webdataset's (members ``KEY.EXT``, grouped by key; webdataset.TarWriter with mtime 0, so a
rerun writes the same bytes).

Atomic: a shard is written to a hidden ``.shard-NNNNNN.tar.partial-PID`` in DST, fsync'ed and renamed, so DST
never holds a half-written shard under its final name; ``index.json`` is written the same way and only after
every shard has been read back byte-equal to its source files. Resumable: a shard already in DST under its final
name is read back and kept when it matches, rewritten when it does not; shards an earlier index listed and
this one does not (a rerun with another shard size) are removed after the new index is in place. Nothing is
written before the input has been checked (SRC exists, holds files, DST is not inside it, the shard size > 0).
"""

from __future__ import annotations

import functools
import io
import json
import os
import re
import tarfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from slowlink.errors import SlowlinkError, SpecError, field_error

INDEX_NAME = "index.json"
SHARD_NAME = "shard-{:06d}.tar"
FORMAT = "webdataset"
# tar: a header per member, data padded to 512-byte blocks, two zero blocks at the end, and the whole archive
# padded to tarfile's record of 20 blocks (POSIX.1-1988 ustar; CPython Lib/tarfile.py RECORDSIZE).
TAR_BLOCK = 512
TAR_RECORD = tarfile.RECORDSIZE
_EXT = re.compile(r"[A-Za-z0-9_]{1,16}")


@dataclass(frozen=True)
class SourceFile:
    """One sample: its path under SRC and its size."""

    rel: str
    size_bytes: int

    @property
    def ext(self) -> str:
        """The member extension: the file's own suffix when it is a plain word, else ``bin``."""
        suffix = Path(self.rel).suffix[1:]
        return suffix if _EXT.fullmatch(suffix) else "bin"


@dataclass(frozen=True)
class ReshardResult:
    """What a reshard wrote: samples, shards (and how many were kept from an earlier run), bytes, the index."""

    samples: int
    shards: int
    reused_shards: int
    data_bytes: int
    shard_bytes: int
    verified: bool
    index: Path
    elapsed_s: float

    def to_json(self) -> dict[str, object]:
        return {"samples": self.samples, "shards": self.shards, "verified": self.verified,
                "reused_shards": self.reused_shards, "data_bytes": self.data_bytes,
                "shard_size_bytes": self.shard_bytes, "index": str(self.index), "elapsed_s": self.elapsed_s}


def key_of(i: int) -> str:
    """The webdataset key of sample ``i``: nine digits (no dot, so the member name splits at the extension)."""
    return f"{i:09d}"


def list_files(src: Path) -> list[SourceFile]:
    """Every regular, non-hidden file under ``src``, sorted by relative path; errors name the directory."""
    if not src.exists():
        raise SpecError(field_error("SRC", str(src), "does not exist: give a directory of files"))
    if not src.is_dir():
        raise SpecError(field_error("SRC", str(src), "is not a directory"))
    found: list[SourceFile] = []
    for root, dirs, files in os.walk(src):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in files:
            p = Path(root, name)
            if not name.startswith(".") and p.is_file():
                found.append(SourceFile(p.relative_to(src).as_posix(), p.stat().st_size))
    if not found:
        raise SpecError(field_error("SRC", str(src), "holds no files (hidden names are skipped)"))
    return sorted(found, key=lambda f: f.rel)


@functools.cache
def header_bytes() -> int:
    """Bytes of one member's header as this Python's tarfile writes it (measured on a one-member archive: a pax
    extended header, when tarfile adds one, is part of it)."""
    buf = io.BytesIO()
    tar_writer(buf).write({"__key__": key_of(0), "bin": b""})
    buf.seek(0)
    with tarfile.open(fileobj=buf) as tf:
        return int(tf.getmembers()[0].offset_data)


def tar_member_bytes(size_bytes: int) -> int:
    """Bytes one member takes in a tar archive: its header plus the data padded to whole 512-byte blocks."""
    return header_bytes() + -(-size_bytes // TAR_BLOCK) * TAR_BLOCK


def tar_file_bytes(member_bytes: int) -> int:
    """An archive's size: its members, two zero blocks, padded to a whole tarfile record."""
    raw = member_bytes + 2 * TAR_BLOCK
    return -(-raw // TAR_RECORD) * TAR_RECORD


def plan_shards(files: list[SourceFile], shard_bytes: float) -> list[range]:
    """Consecutive samples per shard: a shard closes when the next sample would take it past ``shard_bytes``."""
    shards: list[range] = []
    start, members = 0, 0
    for i, f in enumerate(files):
        m = tar_member_bytes(f.size_bytes)
        if i > start and tar_file_bytes(members + m) > shard_bytes:
            shards.append(range(start, i))
            start, members = i, 0
        members += m
    shards.append(range(start, len(files)))
    return shards


def check_destination(src: Path, dst: Path) -> None:
    """DST must be a directory (or absent) outside SRC, and SRC outside DST."""
    s, d = src.resolve(), dst.resolve()
    if d == s or s in d.parents or d in s.parents:
        raise SpecError(field_error("DST", str(dst), f"must lie outside SRC ({str(src)!r}) and not contain it"))
    if dst.exists() and not dst.is_dir():
        raise SpecError(field_error("DST", str(dst), "exists and is not a directory"))


def _write_atomic(final: Path, write: Callable[[BinaryIO], None]) -> None:
    """``write`` into a hidden temporary beside ``final``, fsync, rename; the temporary is removed on any error."""
    tmp = final.with_name(f".{final.name}.partial-{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _put(fh: BinaryIO, data: bytes) -> None:
    fh.write(data)


def _read_source(src: Path, f: SourceFile) -> bytes:
    try:
        return (src / f.rel).read_bytes()
    except OSError as exc:
        raise SpecError(field_error("SRC", str(src / f.rel), f"cannot be read: {exc.strerror}")) from None


def require_webdataset() -> Any:
    """Import webdataset or say how to install it."""
    try:
        import webdataset
    except ImportError:
        raise SlowlinkError("webdataset is not installed: pip install 'slowlink[storage]'") from None
    return webdataset


def tar_writer(fh: BinaryIO) -> Any:
    """webdataset's writer: raw bytes (no encoder), mtime 0 as an int (a float mtime costs a pax header)."""
    return require_webdataset().TarWriter(fh, encoder=False, mtime=0)


def write_shard(path: Path, src: Path, files: list[SourceFile], ids: range) -> None:
    """Samples ``ids`` of ``files`` as one webdataset tar at ``path`` (atomically)."""
    def body(fh: BinaryIO) -> None:
        tw = tar_writer(fh)
        for i in ids:
            tw.write({"__key__": key_of(i), files[i].ext: _read_source(src, files[i])})
        tw.close()

    _write_atomic(path, body)


def iter_shard(path: Path) -> Iterator[tuple[str, bytes]]:
    """(member name, bytes) of every member of one shard, in order (webdataset's tar iterator)."""
    require_webdataset()
    from webdataset.tariterators import tar_file_iterator

    with open(path, "rb") as fh:
        for sample in tar_file_iterator(fh):
            yield sample["fname"], sample["data"]


def shard_matches(path: Path, src: Path, files: list[SourceFile], ids: range) -> bool:
    """True when ``path`` holds exactly samples ``ids``, in order, each byte-equal to its source file."""
    want = iter(ids)
    try:
        for name, data in iter_shard(path):
            i = next(want, None)
            if i is None or name != f"{key_of(i)}.{files[i].ext}" or data != _read_source(src, files[i]):
                return False
    except (OSError, ValueError, EOFError, tarfile.TarError):  # not a tar, or a truncated one
        return False
    return next(want, None) is None


def _index(src: Path, files: list[SourceFile], shards: list[range], names: list[str], shard_bytes: float
           ) -> dict[str, Any]:
    return {"format": FORMAT, "source": str(src.resolve()), "samples": len(files),
            "data_bytes": sum(f.size_bytes for f in files), "shard_size_bytes": shard_bytes,
            "shards": [{"name": n, "first": r.start, "count": len(r)} for n, r in zip(names, shards, strict=True)],
            "files": [f.rel for f in files]}


def _previous_shards(dst: Path) -> set[str]:
    """Shard names an earlier ``index.json`` in ``dst`` lists (only those are ours to remove)."""
    try:
        return {str(s["name"]) for s in load_index(dst)["shards"] if re.fullmatch(r"shard-\d{6}\.tar", s["name"])}
    except (SpecError, KeyError, TypeError):
        return set()


def reshard(src: Path, dst: Path, shard_bytes: float) -> ReshardResult:
    """Reshard ``src`` into ``dst`` (module docstring): plan, write or keep each shard, verify, write the index."""
    if not shard_bytes > 0:
        raise SpecError(field_error("--shard-size", f"{shard_bytes:g}", "must be > 0 bytes, e.g. 1GB"))
    t0 = time.perf_counter()
    check_destination(src, dst)
    files = list_files(src)
    shards = plan_shards(files, shard_bytes)
    dst.mkdir(parents=True, exist_ok=True)
    names, reused = [], 0
    for n, ids in enumerate(shards):
        path = dst / SHARD_NAME.format(n)
        if path.exists() and shard_matches(path, src, files, ids):
            reused += 1
        else:
            write_shard(path, src, files, ids)
            if not shard_matches(path, src, files, ids):
                path.unlink()
                raise SpecError(field_error("DST", str(path), "did not read back byte-equal to its source files"))
        names.append(path.name)
    index = _index(src, files, shards, names, shard_bytes)
    stale = _previous_shards(dst) - set(names)
    _write_atomic(dst / INDEX_NAME, lambda fh: _put(fh, json.dumps(index).encode()))
    for name in stale:  # shards of an earlier index that this one no longer lists (another shard size)
        (dst / name).unlink(missing_ok=True)
    return ReshardResult(len(files), len(shards), reused, index["data_bytes"],
                         sum((dst / n).stat().st_size for n in names), True, dst / INDEX_NAME,
                         time.perf_counter() - t0)


def load_index(dst: Path) -> dict[str, Any]:
    """The index of a resharded directory; an error names the directory when there is none."""
    path = dst / INDEX_NAME
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        raise SpecError(field_error("shards", str(dst), f"has no readable {INDEX_NAME}: run `slowlink reshard` "
                                    "into it first")) from None
    return data
