"""CLI of the storage benchmarks: ``slowlink bench storage`` and ``bench checkpoint`` (registered by cli/bench.py)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from slowlink.cli.bench_record import RESULTS
from slowlink.cli.common import clean_errors, err, out, print_json
from slowlink.errors import SpecError, field_error
from slowlink.units import parse_size

_SHARDS = typer.Option(None, "--shards", help="Shard folder (default DIR-shards next to DIR); made with "
                       "`reshard` unless its index names this dataset.")
_RESULTS = RESULTS


def size_option(name: str, text: str) -> float:
    """A size option in bytes; the message names the option and the value."""
    try:
        return parse_size(text)
    except ValueError as exc:
        raise SpecError(field_error(name, text, f"is not a size ({exc})")) from None


@clean_errors
def storage(
    data_dir: Annotated[Path, typer.Argument(help="Dataset: a directory of small files (grouped into samples by key), "
                                                  "or a shard directory written by `reshard` (read as is).")],
    make: int | None = typer.Option(None, "--make", help="First write N random files into DIR (absent or empty)."),
    file_size: str = typer.Option("16KiB", "--file-size", help="--make: bytes of each file."),
    shards: Path | None = _SHARDS,
    shard_size: str = typer.Option("64MiB", "--shard-size", help="Shard size when the shards are made."),
    workers: int = typer.Option(2, "--workers", help="DataLoader worker processes."),
    batch: int = typer.Option(32, "--batch", help="Samples per batch."),
    order: str = typer.Option("sequential,shuffled", "--order", help="sequential and/or shuffled."),
    cache: str = typer.Option("fadvise", "--cache", help="fadvise (evict each file), drop (root: drop_caches) "
                              "or none (warm)."),
    repeat: int = typer.Option(1, "--repeat", help="Rounds of probe and passes (medians are kept)."),
    probe_size: str = typer.Option("256MiB", "--probe-size", help="Bytes of the disk bandwidth probe."),
    probe_files: int = typer.Option(10_000, "--probe-files", help="One-byte files of the files/s probe."),
    seed: int = typer.Option(0, "--seed", help="Seed of --make and of the shuffles."),
    as_json: bool = typer.Option(False, "--json", help="Print rows as JSON."),
    results: Path | None = _RESULTS,
    no_results: bool = typer.Option(False, "--no-results", help="Do not write a record."),
) -> None:
    """Read small files vs the same samples in tar shards (DataLoader, page cache defeated) beside the model."""
    from slowlink.bench.collectives import require_torch

    require_torch()
    from slowlink.bench.record import StorageRow
    from slowlink.bench.storage import StorageBenchConfig, run_storage
    from slowlink.bench.storage_data import make_dataset
    from slowlink.cli.bench_record import save_record
    from slowlink.progress import status
    from slowlink.report.storage_bench import probe_line, storage_bench_table

    cfg = StorageBenchConfig(workers=workers, batch=batch, orders=tuple(o.strip() for o in order.split(",") if o),
                             cache=cache, repeat=repeat, shard_bytes=size_option("--shard-size", shard_size),
                             probe_bytes=int(size_option("--probe-size", probe_size)), probe_files=probe_files,
                             seed=seed)
    cfg.check()
    if make is not None and make_dataset(data_dir, make, int(size_option("--file-size", file_size)), seed):
        err.print(f"wrote {make:,} files of {file_size} under {data_dir}")
    sdir = shards if shards is not None else data_dir.parent / f"{data_dir.name}-shards"
    with status(f"bench storage: {data_dir}"):
        res = run_storage(data_dir, sdir, cfg)
    rec = save_record("storage", data_dir.name, res.rows, None, asdict(res.cfg), "none", None, results, no_results,
                      res.summary())
    if as_json:
        print_json(rec.to_json()["rows"])
        return
    what = (f"{res.samples:,} samples in {res.shard_count} shards" if res.layouts == ("shards",)
            else f"{res.samples:,} files vs {res.shard_count} shards")
    out.print(storage_bench_table([r for r in rec.rows if isinstance(r, StorageRow)],
                                  f"{what}, {workers} workers, batch {batch}"))
    out.print(probe_line(res.probe))


@clean_errors
def checkpoint(
    nproc: str = typer.Option("2", "--nproc", help="Rank counts, comma separated (e.g. 2,4)."),
    state_size: str = typer.Option("64MiB", "--state-size", help="Model state per rank."),
    mode: str = typer.Option("sync,async", "--mode", help="sync (dcp.save) and/or async (dcp.async_save)."),
    repeat: int = typer.Option(3, "--repeat", help="Saves per mode (the median is kept)."),
    directory: str | None = typer.Option(None, "--dir", help="Where checkpoints go (default: the temp folder)."),
    probe_size: str = typer.Option("128MiB", "--probe-size", help="Bytes of the disk probe."),
    timeout_s: float = typer.Option(300.0, "--timeout", help="Seconds before a run is given up."),
    as_json: bool = typer.Option(False, "--json", help="Print rows as JSON."),
    results: Path | None = _RESULTS,
    no_results: bool = typer.Option(False, "--no-results", help="Do not write a record."),
) -> None:
    """Save and load a sharded state with torch.distributed.checkpoint, sync vs async, beside the model."""
    import tempfile

    from slowlink.bench import launch
    from slowlink.bench.checkpoint import CheckpointBenchConfig, finish_rows, mean_probe, probe_host
    from slowlink.bench.record import CheckpointRow, RankRows
    from slowlink.cli.bench_record import save_record
    from slowlink.progress import progress
    from slowlink.report.storage_bench import checkpoint_bench_table, host_probe_line

    try:
        counts = [int(x) for x in nproc.split(",")]
    except ValueError:
        raise SpecError(field_error("--nproc", nproc, "must be comma-separated integers, e.g. 2,4")) from None
    if any(n < 1 for n in counts):
        raise SpecError(field_error("--nproc", nproc, "must be >= 1 ranks each"))
    cfg = CheckpointBenchConfig(state_bytes=int(size_option("--state-size", state_size)),
                                modes=tuple(m.strip() for m in mode.split(",") if m.strip()), repeat=repeat,
                                directory=directory, probe_bytes=int(size_option("--probe-size", probe_size)))
    cfg.check()
    rows, hosts, where = [], [], Path(directory or tempfile.gettempdir())
    with progress("bench checkpoint", len(counts)) as steps:
        for n in counts:
            steps.begin(f"bench checkpoint: {n} ranks")
            before = probe_host(where, n, cfg.probe_bytes, cfg.state_bytes)
            res: RankRows = launch.run("slowlink.bench.checkpoint:checkpoint_rank", cfg, n, "gloo", timeout_s)
            probe = mean_probe(before, probe_host(where, n, cfg.probe_bytes, cfg.state_bytes))
            rows += finish_rows(res.rows, cfg, probe)
            hosts += res.hostnames
            err.print(host_probe_line(probe) + f" [{n} ranks]")
    rec = save_record("checkpoint", "dcp", rows, sorted(set(hosts)), asdict(cfg), "gloo", None, results, no_results,
                      {"probe": probe.to_json()})
    if as_json:
        print_json(rec.to_json()["rows"])
        return
    out.print(checkpoint_bench_table([r for r in rec.rows if isinstance(r, CheckpointRow)],
                                     f"torch.distributed.checkpoint, {state_size} per rank, gloo"))
