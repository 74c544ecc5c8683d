"""The storage read benchmark at training scale: 100,000 files of 16 KiB (1.6 GB) vs the same samples in 64 MiB
webdataset shards, read through a DataLoader with 2 workers, sequential and shuffled, the page cache defeated
both ways this machine allows (posix_fadvise DONTNEED per file, and drop_caches when run as root), 3 passes
per row (the median is kept), each row beside the storage model's prediction from a measured disk probe.

    PYTHONPATH=src python benchmarks/bench_storage.py [ROOT] [--files N] [--out results.json]

ROOT (default /tmp/slowlink-bench-storage) holds the dataset (kept between runs, it takes a minute to make)
and its shards. No speed goal: the numbers go in docs/storage.md's measured section.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import asdict
from pathlib import Path

from slowlink.bench.pagecache import DROP_CACHES
from slowlink.bench.record import StorageRow, make_record
from slowlink.bench.storage import StorageBenchConfig, run_storage
from slowlink.bench.storage_data import make_dataset
from slowlink.cli.common import out, rounded
from slowlink.report.storage_bench import probe_line, storage_bench_table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("root", nargs="?", type=Path, default=Path("/tmp/slowlink-bench-storage"))
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--file-bytes", type=int, default=16 * 1024)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    data = args.root / f"files-{args.files}"
    t0 = time.perf_counter()
    if make_dataset(data, args.files, args.file_bytes):
        print(f"made {args.files:,} files in {time.perf_counter() - t0:.1f} s")
    caches = ["fadvise"] + (["drop"] if os.access(DROP_CACHES, os.W_OK) else [])
    runs = {}
    for cache in caches:
        cfg = StorageBenchConfig(workers=args.workers, cache=cache, repeat=args.repeat)
        res = run_storage(data, args.root / f"shards-{args.files}", cfg)
        rec = make_record("storage", res.rows, asdict(res.cfg), "none", None, None, res.summary())
        out.print(storage_bench_table([r for r in rec.rows if isinstance(r, StorageRow)],
                                      f"{args.files:,} files, cache: {cache}"))
        out.print(probe_line(res.probe))
        runs[cache] = {"rows": res.rows, "summary": res.summary()}
    if args.out is not None:
        args.out.write_text(json.dumps(rounded(runs), indent=2, default=float) + "\n")


if __name__ == "__main__":
    main()
