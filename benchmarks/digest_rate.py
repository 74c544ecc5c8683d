"""The rate at which one core digests a checkpoint's bytes: hashlib's SHA-256 (what
:mod:`slowlink.bench.manifest` uses), BLAKE2b and zlib's CRC-32 for comparison, over the same random bytes in
the manifest's 4 MiB chunks, from memory (no disk: the digest's CPU cost alone, which is what it adds when
the bytes are already in the page cache or in host memory) and from a file just written (the page cache).

Run: ``python benchmarks/digest_rate.py [--size 256MiB] [--repeat 5]``; prints MB/s per algorithm (median).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import tempfile
import time
import zlib
from collections.abc import Callable

from slowlink import units
from slowlink.bench.manifest import CHUNK_BYTES, digest_file


def _crc(data: bytes) -> None:
    crc = 0
    for i in range(0, len(data), CHUNK_BYTES):
        crc = zlib.crc32(data[i:i + CHUNK_BYTES], crc)


def _hasher(name: str) -> Callable[[bytes], None]:
    def run(data: bytes) -> None:
        h = hashlib.new(name)
        view = memoryview(data)
        for i in range(0, len(data), CHUNK_BYTES):
            h.update(view[i:i + CHUNK_BYTES])
        h.hexdigest()

    return run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="256MiB")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    size = int(units.parse_size(a.size))
    data = os.urandom(size)
    runs: dict[str, Callable[[bytes], None]] = {"sha256": _hasher("sha256"), "blake2b": _hasher("blake2b"),
                                                "crc32": _crc}
    times: dict[str, list[float]] = {k: [] for k in [*runs, "sha256-file"]}
    with tempfile.NamedTemporaryFile() as f:
        f.write(data)
        f.flush()
        for _ in range(a.repeat):  # interleaved: a busy spell of the machine hits every algorithm
            for name, fn in runs.items():
                t0 = time.perf_counter()
                fn(data)
                times[name].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            digest_file(__import__("pathlib").Path(f.name))
            times["sha256-file"].append(time.perf_counter() - t0)
    for name, ts in times.items():
        med = statistics.median(ts)
        lo, hi = size / max(ts) / units.MB, size / min(ts) / units.MB
        print(f"{name:12s} {size / med / units.MB:8.0f} MB/s  (median of {a.repeat}, min {lo:.0f}, max {hi:.0f})")


if __name__ == "__main__":
    main()
