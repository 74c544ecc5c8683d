"""Resharding a directory of files into webdataset tar shards, with an index, verified and resumable.

SRC is read as webdataset samples (:mod:`slowlink.storage.samples`): the files of one key (the path without its
extensions) are one sample, written together under their own names (``KEY.EXT``), samples in key order, into
``shard-NNNNNN.tar`` files of at most ``shard_bytes`` each (a sample larger than that gets a shard of its own).
Files a webdataset reader could not use (no extension, hidden, not regular, symlinks out of SRC, ...) are
skipped and reported with their reason. The tar layout is webdataset's TarWriter (ustar, mtime 0, so a rerun
writes the same bytes).

Atomic: a shard is written to a hidden ``.shard-NNNNNN.tar.partial-PID`` in DST, fsync'ed and renamed, so DST
never holds a half-written shard under its final name; a partial whose process is gone (a killed run) is
removed by the next run. ``index.json`` is written the same way and only after every shard has been read back
byte-equal to its source files. Resumable: a shard already in DST under its final name is read back and kept
when it matches, rewritten when it does not; shards an earlier index listed and this one does not (a rerun
with another shard size) are removed after the new index is in place. Nothing is written before the input has
been checked (the shard size > 0, DST outside SRC, SRC holds readable files).
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
from slowlink.procs import pid_alive
from slowlink.storage.samples import Sample, Skipped, SourceFile, name_json, scan

INDEX_NAME = "index.json"
SHARD_NAME = "shard-{:06d}.tar"
FORMAT = "webdataset"
# tar: a header per member, data padded to 512-byte blocks, two zero blocks at the end, and the whole archive
# padded to tarfile's record of 20 blocks (POSIX.1-1988 ustar; CPython Lib/tarfile.py RECORDSIZE).
TAR_BLOCK = 512
TAR_RECORD = tarfile.RECORDSIZE
_PARTIAL = re.compile(r"\.(?:shard-\d{6}\.tar|index\.json)\.partial-(\d+)")


@dataclass(frozen=True)
class ReshardResult:
    """What a reshard wrote: samples and files, shards (and how many were kept from an earlier run), bytes, what
    it skipped, the index."""

    samples: int
    files: int
    shards: int
    reused_shards: int
    data_bytes: int
    shard_bytes: float
    bytes_written: int
    skipped: tuple[Skipped, ...]
    removed_partials: int
    verified: bool
    index: Path
    elapsed_s: float

    def to_json(self) -> dict[str, object]:
        return {"samples": self.samples, "files": self.files, "shards": self.shards, "verified": self.verified,
                "reused_shards": self.reused_shards, "data_bytes": self.data_bytes,
                "shard_size_bytes": self.shard_bytes, "bytes_written": self.bytes_written,
                "skipped": [s.to_json() for s in self.skipped], "removed_partials": self.removed_partials,
                "index": str(self.index), "elapsed_s": self.elapsed_s}


def key_of(i: int) -> str:
    """A numbered webdataset key (nine digits, no dot), for generated samples that have no name of their own."""
    return f"{i:09d}"


def list_files(src: Path) -> list[SourceFile]:
    """Every file of every sample of ``src``, in the order a reshard writes them."""
    return scan(src).files


@functools.cache
def header_bytes() -> int:
    """Bytes of one member's header as this Python's tarfile writes it for webdataset's TarWriter (measured on a
    one-member archive)."""
    buf = io.BytesIO()
    tar_writer(buf).write({"__key__": key_of(0), "bin": b""})
    buf.seek(0)
    with tarfile.open(fileobj=buf) as tf:
        return int(tf.getmembers()[0].offset_data)


def tar_member_bytes(size_bytes: int) -> int:
    """Bytes one member takes in a tar archive: its header plus the data padded to whole 512-byte blocks."""
    return header_bytes() + -(-size_bytes // TAR_BLOCK) * TAR_BLOCK


def sample_member_bytes(sample: Sample) -> int:
    """Bytes a sample's members take in a tar archive."""
    return sum(tar_member_bytes(p.size_bytes) for p in sample.parts)


def tar_file_bytes(member_bytes: int) -> int:
    """An archive's size: its members, two zero blocks, padded to a whole tarfile record."""
    raw = member_bytes + 2 * TAR_BLOCK
    return -(-raw // TAR_RECORD) * TAR_RECORD


def plan_shards(samples: tuple[Sample, ...] | list[Sample], shard_bytes: float) -> list[range]:
    """Consecutive samples per shard: a shard closes when the next sample would take it past ``shard_bytes``."""
    shards: list[range] = []
    start, members = 0, 0
    for i, s in enumerate(samples):
        m = sample_member_bytes(s)
        if i > start and tar_file_bytes(members + m) > shard_bytes:
            shards.append(range(start, i))
            start, members = i, 0
        members += m
    shards.append(range(start, len(samples)))
    return shards


def check_destination(src: Path, dst: Path) -> None:
    """DST must be a directory (or absent) outside SRC, and SRC outside DST."""
    s, d = src.resolve(), dst.resolve()
    if d == s or s in d.parents or d in s.parents:
        raise SpecError(field_error("DST", str(dst), f"must lie outside SRC ({str(src)!r}) and not contain it"))
    if dst.exists() and not dst.is_dir():
        raise SpecError(field_error("DST", str(dst), "exists and is not a directory"))


def remove_dead_partials(dst: Path) -> int:
    """Remove the hidden partial files of reshard runs whose process is gone; how many were removed."""
    n = 0
    for p in dst.iterdir():
        m = _PARTIAL.fullmatch(p.name)
        if m and int(m.group(1)) != os.getpid() and not pid_alive(int(m.group(1))):
            p.unlink(missing_ok=True)
            n += 1
    return n


def write_atomic(final: Path, write: Callable[[BinaryIO], None]) -> None:
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


def write_shard(path: Path, src: Path, samples: tuple[Sample, ...], ids: range) -> None:
    """Samples ``ids`` as one webdataset tar at ``path`` (atomically), every part of a sample together."""
    def body(fh: BinaryIO) -> None:
        tw = tar_writer(fh)
        for i in ids:
            tw.write({"__key__": samples[i].key, **{p.ext: _read_source(src, p) for p in samples[i].parts}})
        tw.close()

    write_atomic(path, body)


def iter_shard(path: Path) -> Iterator[tuple[str, bytes]]:
    """(member name, bytes) of every member of one shard, in order (webdataset's tar iterator)."""
    require_webdataset()
    from webdataset.tariterators import tar_file_iterator

    with open(path, "rb") as fh:
        for sample in tar_file_iterator(fh):
            yield sample["fname"], sample["data"]


def shard_matches(path: Path, src: Path, samples: tuple[Sample, ...], ids: range) -> bool:
    """True when ``path`` holds exactly the parts of samples ``ids``, in order, each byte-equal to its file."""
    want = iter([p for i in ids for p in samples[i].parts])
    try:
        for name, data in iter_shard(path):
            f = next(want, None)
            if f is None or name != f.member or data != _read_source(src, f):
                return False
    except (OSError, ValueError, EOFError, tarfile.TarError):  # not a tar, or a truncated one
        return False
    return next(want, None) is None


def _index(src: Path, samples: tuple[Sample, ...], shards: list[range], names: list[str], shard_bytes: float,
           skipped: tuple[Skipped, ...]) -> dict[str, Any]:
    """The index: per shard its samples (``first``, ``count``) and files (``first_file``, ``file_count``); every
    file in member order, names reversible (:func:`slowlink.storage.samples.name_json`)."""
    firsts, n = [], 0
    for s in samples:
        firsts.append(n)
        n += len(s.parts)
    firsts.append(n)
    return {"format": FORMAT, "source": str(src.resolve()), "samples": len(samples), "file_count": n,
            "data_bytes": sum(s.size_bytes for s in samples), "shard_size_bytes": shard_bytes,
            "shards": [{"name": nm, "first": r.start, "count": len(r), "first_file": firsts[r.start],
                        "file_count": firsts[r.stop] - firsts[r.start]} for nm, r in zip(names, shards, strict=True)],
            "files": [name_json(p.rel) for s in samples for p in s.parts],
            "skipped": [s.to_json() for s in skipped]}


def _previous_shards(dst: Path) -> set[str]:
    """Shard names an earlier ``index.json`` in ``dst`` lists (only those are ours to remove)."""
    try:
        return {str(s["name"]) for s in load_index(dst)["shards"] if re.fullmatch(r"shard-\d{6}\.tar", s["name"])}
    except (SpecError, KeyError, TypeError):
        return set()


def reshard(src: Path, dst: Path, shard_bytes: float) -> ReshardResult:
    """Reshard ``src`` into ``dst`` (module docstring): check, plan, write or keep each shard, verify, index."""
    if not shard_bytes > 0:
        raise SpecError(field_error("--shard-size", f"{shard_bytes:g}", "must be > 0 bytes, e.g. 1GB"))
    t0 = time.perf_counter()
    check_destination(src, dst)
    source = scan(src)
    samples = source.samples
    shards = plan_shards(samples, shard_bytes)
    dst.mkdir(parents=True, exist_ok=True)
    removed = remove_dead_partials(dst)
    names, reused = [], 0
    for n, ids in enumerate(shards):
        path = dst / SHARD_NAME.format(n)
        if path.exists() and shard_matches(path, src, samples, ids):
            reused += 1
        else:
            write_shard(path, src, samples, ids)
            if not shard_matches(path, src, samples, ids):
                path.unlink()
                raise SpecError(field_error("DST", str(path), "did not read back byte-equal to its source files"))
        names.append(path.name)
    index = _index(src, samples, shards, names, shard_bytes, source.skipped)
    stale = _previous_shards(dst) - set(names)
    write_atomic(dst / INDEX_NAME, lambda fh: _put(fh, json.dumps(index).encode()))
    for name in stale:  # shards of an earlier index that this one no longer lists (another shard size)
        (dst / name).unlink(missing_ok=True)
    return ReshardResult(len(samples), index["file_count"], len(shards), reused, index["data_bytes"], shard_bytes,
                         sum((dst / n).stat().st_size for n in names), source.skipped, removed, True,
                         dst / INDEX_NAME, time.perf_counter() - t0)


def load_index(dst: Path) -> dict[str, Any]:
    """The index of a resharded directory; an error names the directory when there is none."""
    path = dst / INDEX_NAME
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        raise SpecError(field_error("shards", str(dst), f"has no readable {INDEX_NAME}: run `slowlink reshard` "
                                    "into it first")) from None
    return data


def is_shard_dir(path: Path) -> bool:
    """True when ``path`` holds a webdataset shard index (``index.json`` of this format) and its first shard."""
    try:
        idx = load_index(path)
        return bool(idx.get("format") == FORMAT and idx["shards"] and (path / idx["shards"][0]["name"]).is_file())
    except (SpecError, KeyError, TypeError, AttributeError):
        return False
