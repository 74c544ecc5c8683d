"""Rendering of the storage benchmarks: read passes (files vs shards) and checkpoints, each beside the model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.table import Table

from slowlink import units

if TYPE_CHECKING:
    from slowlink.bench.checkpoint import HostProbe
    from slowlink.bench.manifest import Verification
    from slowlink.bench.record import CheckpointRow, StorageRow
    from slowlink.bench.storage import DiskProbe
    from slowlink.storage.reshard import ReshardResult


def _num(x: float | None, fmt: str) -> str:
    return "n/a" if x is None else format(x, fmt)


def storage_bench_table(rows: Sequence[StorageRow], title: str) -> Table:
    """Per layout and order: files/s, MB/s, latency percentiles, cache left, and the model's prediction."""
    t = Table("layout", "order", "files opened", "files/s", "MB/s", "p50 (ms)", "p99 (ms)", "cached after",
              "model files/s", "model MB/s", "model bound", "model error (rate)", title=title)
    for r in rows:
        t.add_row(r.layout, r.order, _num(r.files_opened, ","), f"{r.files_per_s:,.0f}", f"{r.mbyte_s:.1f}",
                  _num(r.latency_p50_ms, ".3f"), _num(r.latency_p99_ms, ".3f"), _num(r.resident_after, ".0%"),
                  _num(r.predicted_files_per_s, ",.0f"), _num(r.predicted_mbyte_s, ".1f"),
                  r.predicted_binding or "n/a", _num(r.error, "+.0%"))
    return t


def probe_line(probe: DiskProbe) -> str:
    """The disk as the model sees it, and how it was measured."""
    return (f"disk probe: {probe.bw_bytes_s / units.MB:.1f} MB/s, {probe.files_s:,.0f} files/s "
            f"({probe.HOW}; cache: {probe.cache})")


def reshard_line(res: ReshardResult) -> str:
    """One line: samples and files, shards (kept from a previous run), bytes, skipped files, verified, the index."""
    why = sorted({s.reason.split(":")[0] for s in res.skipped})
    return (f"{res.samples:,} samples ({res.files:,} files) -> {res.shards} shards ({res.reused_shards} "
            f"kept from an earlier run), {res.data_bytes / units.MB:,.1f} MB of data in "
            f"{res.bytes_written / units.MB:,.1f} MB of tar, verified byte-equal: {res.verified}; "
            f"{len(res.skipped):,} files skipped" + (f" ({'; '.join(why[:4])}; all in --json)" if res.skipped else "")
            + f"; index {res.index} ({res.elapsed_s:.1f} s)")


def verify_lines(v: Verification) -> list[str]:
    """The verdict of ``checkpoint verify``: intact or the problems, and what was proven."""
    how = (f"{v.files} files, {v.hashed_bytes / units.MB:,.1f} MB hashed (SHA-256) in {v.seconds:.2f} s" if v.digests
           else "no MANIFEST.json: files checked against .metadata for presence and length only; flipped bytes "
           "cannot be detected without digests")
    if v.ok:
        return [f"{'intact' if v.digests else 'structure intact, bytes not proven'}: {v.directory} ({how})"]
    return [f"DAMAGED: {v.directory} ({how})", *(f"  {p.file}: {p.detail} (rule {p.rule})" for p in v.problems)]


def checkpoint_bench_table(rows: Sequence[CheckpointRow], title: str) -> Table:
    """Per mode and rank count: blocking, drain, restore and GB/s, each beside the model's."""
    t = Table("mode", "ranks", "GB", "blocking (s)", "model", "drain (s)", "model", "write GB/s", "write error",
              "restore (s)", "model", "restore error", title=title)
    for r in rows:
        t.add_row(r.mode, str(r.ranks), _num(None if r.bytes is None else r.bytes / units.GB, ".3f"),
                  f"{r.blocking_s:.3f}", _num(r.predicted_blocking_s, ".3f"), f"{r.drain_s:.3f}",
                  _num(r.predicted_drain_s, ".3f"), _num(r.gbyte_s, ".3f"), _num(r.write_error, "+.0%"),
                  f"{r.restore_s:.3f}", _num(r.predicted_restore_s, ".3f"), _num(r.restore_error, "+.0%"))
    return t


def host_probe_line(probe: HostProbe) -> str:
    """The machine as the checkpoint model sees it, and how it was measured."""
    return (f"probe: disk write {probe.write_bytes_s / units.MB:.1f} MB/s, read {probe.read_bytes_s / units.MB:.1f} "
            f"MB/s, host copy {probe.copy_bytes_s / units.GB:.2f} GB/s, torch.save "
            f"{probe.serialize_bytes_s / units.GB:.2f} GB/s per core, {probe.cores} cores ({probe.HOW})")
