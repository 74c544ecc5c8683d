"""``slowlink bench storage``: training-shaped reads of a dataset of small files and of the same samples in
webdataset tar shards, through a real ``torch.utils.data.DataLoader``, with the storage model's prediction.

Each pass reads every sample once through ``workers`` DataLoader processes (batches of ``batch``, two batches
prefetched per worker, PyTorch's default), sequentially or shuffled (files: a seeded permutation of samples;
shards: a seeded permutation of shards), after the page cache of the data has been emptied
(:mod:`slowlink.bench.pagecache`); files/s counts samples (source files) delivered per second in both layouts.

The prediction is :func:`slowlink.storage.read.read_time_s` ``= max(N S / bw, N / ops)`` over the files the
layout opens (N samples of S bytes, or the shards), joined as in :func:`slowlink.storage.read.data_feed` with
the reader-CPU supply ``samples / cpu`` (the slowest supply binds, loading overlaps). ``bw``, ``ops`` and ``cpu``
are measured by a probe on the same filesystem, through the same loader, workers and cache defeat, on other
data: ``bw`` from ``probe_bytes`` in large files (one per worker, read whole), ``ops`` from ``probe_files``
one-byte files (files/s when the bytes cost nothing), ``cpu`` from the same number of one-byte samples in
one tar shard per worker (samples/s when neither bytes nor opens cost anything). Nothing is fitted to the
benchmark's own passes.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from slowlink import units
from slowlink.bench import pagecache
from slowlink.bench.storage_data import collate, files_dataset, shards_dataset
from slowlink.errors import BenchError, SpecError, field_error
from slowlink.storage.read import read_time_s
from slowlink.storage.reshard import SHARD_NAME, is_shard_dir, key_of, load_index, reshard, tar_writer
from slowlink.storage.samples import scan

ORDERS = ("sequential", "shuffled")
RESIDENT_SAMPLE = 256  # files whose cached pages are counted after a pass (mincore is cheap, not free)


@dataclass(frozen=True)
class StorageBenchConfig:
    """Options of one benchmark run."""

    workers: int = 2
    """DataLoader worker processes (0: read in the main process)."""
    batch: int = 32
    """Samples per batch."""
    orders: tuple[str, ...] = ORDERS
    """sequential and/or shuffled."""
    cache: str = "fadvise"
    """How the page cache is kept out: fadvise, drop (root) or none (a warm-cache pass)."""
    repeat: int = 1
    """Rounds of a disk probe then every pass; each row keeps its median pass, the model the median probe."""
    shard_bytes: float = 64 * units.MiB
    """Shard size when the shards are made by this run."""
    probe_bytes: int = 256 * 2**20
    """Bytes of the bandwidth probe."""
    probe_files: int = 10_000
    """One-byte files of the per-file rate probe."""
    seed: int = 0
    """Seed of the shuffles."""

    def check(self) -> None:
        bad = [(n, v, r) for n, v, r in (
            ("--workers", self.workers, self.workers >= 0), ("--batch", self.batch, self.batch >= 1),
            ("--repeat", self.repeat, self.repeat >= 1), ("--shard-size", self.shard_bytes, self.shard_bytes > 0),
            ("--probe-bytes", self.probe_bytes, self.probe_bytes >= 2**20),
            ("--probe-files", self.probe_files, self.probe_files >= 10)) if not r]
        if bad:
            name, value, _ = bad[0]
            rule = {"--workers": "must be >= 0", "--probe-bytes": "must be >= 1 MiB",
                    "--probe-files": "must be >= 10", "--shard-size": "must be > 0 bytes"}.get(name, "must be >= 1")
            raise SpecError(field_error(name, value, rule))
        for o in self.orders:
            if o not in ORDERS:
                raise SpecError(field_error("--order", o, f"must be one of {', '.join(ORDERS)}"))
        if not self.orders:
            raise SpecError(field_error("--order", "", f"names none of {', '.join(ORDERS)}"))
        pagecache.check_method(self.cache)


@dataclass(frozen=True)
class Pass:
    """One pass over a dataset: samples and bytes read, the timed part of them, its seconds, and every
    sample's read seconds."""

    samples: int
    data_bytes: int
    timed_samples: int
    timed_bytes: int
    seconds: float
    latencies_s: np.ndarray

    @property
    def samples_s(self) -> float:
        return self.timed_samples / self.seconds

    @property
    def bytes_s(self) -> float:
        return self.timed_bytes / self.seconds


def run_pass(dataset: Any, shuffle: bool, cfg: StorageBenchConfig) -> Pass:
    """Iterate a DataLoader over ``dataset`` once, timed from the first batch (the workers' start-up, a fixed
    cost of a loader, left out) to the last; a pass of one batch is timed from the loader's creation."""
    import torch
    from torch.utils.data import DataLoader

    g = torch.Generator()
    g.manual_seed(cfg.seed)
    extra: dict[str, Any] = {"prefetch_factor": 2} if cfg.workers else {}
    start = time.perf_counter()
    loader = DataLoader(dataset, batch_size=cfg.batch, shuffle=shuffle, num_workers=cfg.workers,
                        collate_fn=collate, generator=g, **extra)
    n = nbytes = 0
    first: tuple[float, int, int] | None = None
    lat: list[float] = []
    for k, b, ts in loader:
        n, nbytes = n + k, nbytes + b
        lat += ts
        if first is None:
            first = (time.perf_counter(), n, nbytes)
    end = time.perf_counter()
    t0, n0, b0 = first if first is not None and n > first[1] else (start, 0, 0)
    return Pass(n, nbytes, n - n0, nbytes - b0, end - t0, np.asarray(lat))


@dataclass(frozen=True)
class DiskProbe:
    """This filesystem as the model sees it: read bandwidth and files/s, both measured (module docstring)."""

    bw_bytes_s: float
    files_s: float
    samples_s: float
    probe_bytes: int
    probe_files: int
    workers: int
    cache: str

    HOW = ("bw: probe_bytes in one large file per worker, read whole; files/s: probe_files one-byte files; "
           "samples/s: as many one-byte samples in one tar per worker; same DataLoader, workers and cache defeat "
           "as the passes")

    def to_json(self) -> dict[str, object]:
        return {"read_mbyte_s": self.bw_bytes_s / units.MB, "files_per_s": self.files_s,
                "tar_samples_per_s": self.samples_s,
                "probe_bytes": self.probe_bytes, "probe_files": self.probe_files, "workers": self.workers,
                "cache": self.cache, "how": self.HOW}


def _write(path: Path, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def probe_disk(where: Path, cfg: StorageBenchConfig) -> DiskProbe:
    """Measure bandwidth and files/s in a hidden temporary folder under ``where`` (removed afterwards)."""
    rng = np.random.default_rng(cfg.seed)
    tmp = Path(tempfile.mkdtemp(prefix=".slowlink-probe-", dir=where))
    try:
        big_n = max(1, cfg.workers)
        big = [tmp / f"big{i}.bin" for i in range(big_n)]
        for p in big:
            _write(p, rng.bytes(cfg.probe_bytes // big_n))
        tiny = [tmp / f"t{i:06d}" for i in range(cfg.probe_files)]
        for p in tiny:
            p.write_bytes(b"x")
        os.sync()
        evict = cfg.cache != "none"
        pagecache.defeat(cfg.cache, big)
        bw = run_pass(files_dataset([[p] for p in big], evict), False, cfg)
        pagecache.defeat(cfg.cache, tiny)
        small = run_pass(files_dataset([[p] for p in tiny], evict), False, cfg)
        tars = _tiny_shards(tmp, cfg.probe_files, big_n)
        pagecache.defeat(cfg.cache, tars)
        cpu = run_pass(shards_dataset(tars, evict, None), False, cfg)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return DiskProbe(bw.bytes_s, small.samples_s, cpu.samples_s,
                     cfg.probe_bytes, cfg.probe_files, cfg.workers, cfg.cache)


def _tiny_shards(where: Path, samples: int, shards: int) -> list[Path]:
    """``samples`` one-byte samples in ``shards`` webdataset tars under ``where`` (fsync'ed)."""
    paths = []
    for k in range(shards):
        ids = range(k, samples, shards)
        p = where / f"tiny{k}.tar"

        def body(fh: Any, ids: range = ids) -> None:
            tw = tar_writer(fh)
            for i in ids:
                tw.write({"__key__": key_of(i), "bin": b"x"})
            tw.close()

        with open(p, "wb") as fh:
            body(fh)
            fh.flush()
            os.fsync(fh.fileno())
        paths.append(p)
    return paths


def shards_for(data_dir: Path, shards_dir: Path, n_samples: int, shard_bytes: float) -> list[Path]:
    """The shards of ``data_dir`` in ``shards_dir``: reused when its index names this dataset, else resharded."""
    try:
        idx = load_index(shards_dir)
        fresh = (idx.get("source") == str(data_dir.resolve()) and idx.get("samples") == n_samples
                 and idx.get("shard_size_bytes") == shard_bytes)
    except SpecError:
        fresh = False
    if not fresh:
        reshard(data_dir, shards_dir, shard_bytes)
        idx = load_index(shards_dir)
    return [shards_dir / s["name"] for s in idx["shards"]]


def _one_pass(layout: str, order: str, samples: list[list[Path]], shards: list[Path], cfg: StorageBenchConfig
              ) -> Pass:
    """One timed pass of ``layout`` in ``order`` after the cache of its files was emptied."""
    evict, shuffled = cfg.cache != "none", order == "shuffled"
    if layout == "files":
        pagecache.defeat(cfg.cache, [p for s in samples for p in s])
        return run_pass(files_dataset(samples, evict), shuffled, cfg)
    pagecache.defeat(cfg.cache, shards)
    return run_pass(shards_dataset(shards, evict, cfg.seed if shuffled else None), False, cfg)


def median_probe(probes: list[DiskProbe]) -> DiskProbe:
    """Each measured rate's median over ``probes``."""
    def med(attr: str) -> float:
        return float(np.median([getattr(p, attr) for p in probes]))

    return replace(probes[0], bw_bytes_s=med("bw_bytes_s"), files_s=med("files_s"), samples_s=med("samples_s"))


def row(layout: str, order: str, p: Pass, opened: list[Path], probe: DiskProbe, cfg: StorageBenchConfig
        ) -> dict[str, Any]:
    """One row: what the pass measured and what the model predicts for the same files, bytes and disk."""
    size = sum(f.stat().st_size for f in opened)
    bound = {"bandwidth": size / probe.bw_bytes_s, "per-file": len(opened) / probe.files_s,
             "reader CPU": p.samples / probe.samples_s}
    pred = max(read_time_s(len(opened), size / len(opened), probe.bw_bytes_s, probe.files_s), bound["reader CPU"])
    pct = np.percentile(p.latencies_s, [50, 99]) / units.MS if p.latencies_s.size else [0.0, 0.0]
    step = max(1, len(opened) // RESIDENT_SAMPLE)
    return {"layout": layout, "order": order, "workers": cfg.workers, "batch": cfg.batch, "cache": cfg.cache,
            "samples": p.samples, "files_opened": len(opened), "bytes": p.data_bytes, "seconds": p.seconds,
            "files_per_s": p.samples_s, "mbyte_s": p.bytes_s / units.MB,
            "latency_p50_ms": float(pct[0]), "latency_p99_ms": float(pct[1]),
            "resident_after": pagecache.resident_fraction(opened[::step]),
            "predicted_s": pred, "predicted_files_per_s": p.samples / pred,
            "predicted_mbyte_s": p.data_bytes / pred / units.MB,
            "predicted_binding": max(bound, key=lambda k: bound[k]),
            "error": p.samples / pred / p.samples_s - 1.0}  # model's rate / measured - 1: > 0, model optimistic


@dataclass(frozen=True)
class StorageRun:
    """A ``bench storage`` run: its ``rows`` (the record's, as written: one per layout and order, see
    :func:`row`), the dataset and shard folders, the dataset's ``samples`` (each of ``source_files`` files, or
    read out of the shards), the ``shard_count``, the ``layouts`` read, the disk ``probe`` and the ``cfg``."""

    rows: list[dict[str, Any]]
    dataset: Path
    shards: Path
    samples: int
    source_files: int
    shard_count: int
    layouts: tuple[str, ...]
    probe: DiskProbe
    cfg: StorageBenchConfig

    def summary(self) -> dict[str, Any]:
        """The record's ``summary``."""
        return {"dataset": str(self.dataset), "shards": str(self.shards), "files": self.samples,
                "samples": self.samples, "source_files": self.source_files, "shard_count": self.shard_count,
                "layouts": list(self.layouts), "shard_pattern": SHARD_NAME, "probe": self.probe.to_json(),
                "config": asdict(self.cfg)}


def run_storage(data_dir: Path, shards_dir: Path, cfg: StorageBenchConfig) -> StorageRun:
    """Probe the disk, make or reuse the shards, and time every layout x order; rows and a summary.

    A ``data_dir`` that is itself a shard directory (``index.json`` and its tars, as ``reshard`` writes) is read
    as shards only: its samples out of its tars, there being no loose files to compare with."""
    cfg.check()
    if is_shard_dir(data_dir):
        idx = load_index(data_dir)
        samples: list[list[Path]] = []
        n_samples, shards_dir = int(idx["samples"]), data_dir
        shards = [data_dir / s["name"] for s in idx["shards"]]
        layouts: tuple[str, ...] = ("shards",)
    else:
        samples = [[data_dir / p.rel for p in s.parts] for s in scan(data_dir).samples]
        n_samples, layouts = len(samples), ("files", "shards")
        shards = shards_for(data_dir, shards_dir, n_samples, cfg.shard_bytes)
    files = [p for s in samples for p in s]
    keys = [(layout, order) for order in cfg.orders for layout in layouts]
    probes: list[DiskProbe] = []
    passes: dict[tuple[str, str], list[Pass]] = {k: [] for k in keys}
    for _ in range(cfg.repeat):  # a probe, then every pass, per round: a busy spell of the machine hits both
        probes.append(probe_disk(shards_dir, cfg))
        for layout, order in keys:
            passes[layout, order].append(_one_pass(layout, order, samples, shards, cfg))
    probe = median_probe(probes)
    rows = []
    for layout, order in keys:
        p = sorted(passes[layout, order], key=lambda q: q.seconds)[len(passes[layout, order]) // 2]
        rows.append(row(layout, order, p, files if layout == "files" else shards, probe, cfg))
    if any(r["samples"] != n_samples for r in rows):
        raise BenchError(f"a pass read {[r['samples'] for r in rows]} samples, not the dataset's {n_samples}")
    return StorageRun(rows, data_dir, shards_dir, n_samples, len(files), len(shards), layouts, probe, cfg)
