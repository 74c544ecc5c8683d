"""What ``slowlink bench storage`` reads: a synthetic dataset of small files, and the two torch datasets that
read it as training does, one file per sample or sample after sample out of webdataset tar shards.

Each dataset returns ``(bytes, seconds the read took)`` per sample and, with ``evict``, drops the pages it
read from the page cache (:mod:`slowlink.bench.pagecache`) so that the next pass reads from the disk again.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
from torch.utils.data import Dataset, IterableDataset, get_worker_info

from slowlink.bench.pagecache import evict_fd
from slowlink.errors import SpecError, field_error

MARKER = ".slowlink-dataset.json"
FILES_PER_DIR = 1000  # a flat directory of 100k entries is itself a metadata benchmark; ImageNet uses 1000
Sample = tuple[bytes, float]


def make_dataset(root: Path, n_files: int, file_bytes: int, seed: int = 0) -> bool:
    """Write ``n_files`` random files of ``file_bytes`` under ``root`` (``dNNNN/NNNNNNNN.bin``, 1000 a folder).

    Returns False when ``root`` already holds this very dataset (its marker matches) and nothing was written.
    A ``root`` holding anything else is refused, so no user file is ever mixed with generated ones.
    """
    if n_files < 1:
        raise SpecError(field_error("--make", n_files, "must be >= 1 files"))
    if file_bytes < 1:
        raise SpecError(field_error("--file-size", file_bytes, "must be >= 1 byte"))
    want = {"files": n_files, "file_bytes": file_bytes, "seed": seed}
    marker = root / MARKER
    if marker.is_file():
        try:
            if json.loads(marker.read_text()) == want:
                return False
        except ValueError:
            pass
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise SpecError(field_error("DIR", str(root), "must be absent or empty for --make (it holds other files)"))
    rng = np.random.default_rng(seed)
    for i in range(n_files):
        d = root / f"d{i // FILES_PER_DIR:04d}"
        if i % FILES_PER_DIR == 0:
            d.mkdir(parents=True, exist_ok=True)
        (d / f"{i:08d}.bin").write_bytes(rng.bytes(file_bytes))
    os.sync()
    marker.write_text(json.dumps(want))
    return True


def read_file(path: Path, evict: bool) -> Sample:
    """One whole file: open, read, (evict), close; the bytes and the seconds it took."""
    t0 = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        if evict:
            evict_fd(fd)
    finally:
        os.close(fd)
    return b"".join(chunks), time.perf_counter() - t0


def collate(batch: list[Sample]) -> tuple[int, int, list[float]]:
    """A batch as (samples, bytes, per-sample read seconds): the bytes crossed the worker queue already."""
    return len(batch), sum(len(b) for b, _ in batch), [t for _, t in batch]


def files_dataset(samples: Sequence[Sequence[Path]], evict: bool) -> Dataset[Sample]:
    """A map-style dataset: sample ``i`` is the files ``samples[i]`` (its parts), each read whole."""
    class FilesDataset(Dataset[Sample]):
        def __len__(self) -> int:
            return len(samples)

        def __getitem__(self, i: int) -> Sample:
            parts = [read_file(p, evict) for p in samples[i]]
            return b"".join(b for b, _ in parts), sum(t for _, t in parts)

    return FilesDataset()


def shard_samples(path: Path, evict: bool) -> Iterator[Sample]:
    """The samples of one tar shard in order, each with its read time: members grouped by key as a webdataset
    reader groups them (consecutive members of one ``base_plus_ext`` key; a member without a key is dropped)."""
    from webdataset.tariterators import base_plus_ext, tar_file_iterator

    with open(path, "rb", buffering=1 << 20) as fh:
        key: str | None = None
        parts: list[bytes] = []
        t0 = time.perf_counter()
        for member in tar_file_iterator(fh):
            k, _ = base_plus_ext(member["fname"])
            if k is None:
                continue
            if parts and k != key:
                yield b"".join(parts), time.perf_counter() - t0  # includes the read of the next key's first member
                t0, parts = time.perf_counter(), []
            key = k
            parts.append(member["data"])
        if parts:
            yield b"".join(parts), time.perf_counter() - t0
        if evict:
            evict_fd(fh.fileno())


def shards_dataset(shards: list[Path], evict: bool, seed: int | None) -> IterableDataset[Sample]:
    """An iterable dataset over tar shards: worker ``w`` of ``W`` reads shards ``w, w + W, ...``; with a
    ``seed`` the shard order is shuffled first (webdataset's shard shuffle; samples in a shard keep their order,
    a sample shuffle buffer changes no I/O)."""
    order = list(shards)
    if seed is not None:
        np.random.default_rng(seed).shuffle(order)

    class ShardsDataset(IterableDataset[Sample]):
        def __iter__(self) -> Iterator[Sample]:
            info = get_worker_info()
            mine = order if info is None else order[info.id::info.num_workers]
            for p in mine:
                yield from shard_samples(p, evict)

    return ShardsDataset()
