"""Where a torch.distributed.checkpoint save spends its time, in one process (no process group): the same bytes
written four ways, each fsync'ed, interleaved and repeated, against the model's ``serialize + write``.

    raw        the tensors' bytes written and fsync'ed (what the disk probe of ``bench checkpoint`` measures)
    save-nocrc torch.save of each tensor into one file with CRC-32 off
    save       torch.save of each tensor into one file (CRC-32 on: torch's default)
    dcp        dcp.save(no_dist=True): FileSystemWriter, one writer thread (its default)
    serialize  torch.save into /dev/null (CRC-32 on): the CPU pass alone

Model (:func:`slowlink.storage.checkpoint.dcp_write_time_s`, one rank on one core): B / serialize + B / raw.
Run: ``python benchmarks/dcp_write_path.py [--size 128MiB] [--repeat 5] [--dir /tmp]``; needs torch.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed.checkpoint as dcp
import torch.utils.serialization

from slowlink import units
from slowlink.storage.checkpoint import dcp_write_time_s

TENSORS = 8


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="128MiB")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    args = ap.parse_args()
    nbytes = int(units.parse_size(args.size))
    state = {f"layer{i}": torch.randn(nbytes // 4 // TENSORS) for i in range(TENSORS)}
    nbytes = sum(t.numel() * 4 for t in state.values())
    raw = b"".join(t.numpy().tobytes() for t in state.values())
    crc = torch.utils.serialization.config.save  # type: ignore[attr-defined]
    root = Path(tempfile.mkdtemp(prefix="slowlink-dcp-path-", dir=args.dir))

    def w_raw(d: Path) -> None:
        (d / "raw").write_bytes(raw)
        _fsync(d / "raw")

    def w_save(d: Path) -> None:
        with open(d / "save", "wb") as fh:
            for t in state.values():
                torch.save(t, fh)
        _fsync(d / "save")

    def w_save_nocrc(d: Path) -> None:
        crc.compute_crc32 = False
        try:
            w_save(d)
        finally:
            crc.compute_crc32 = True

    def w_dcp(d: Path) -> None:
        dcp.save(state, checkpoint_id=str(d / "dcp"), no_dist=True)

    def serialize(d: Path) -> None:
        with open(os.devnull, "wb") as fh:
            for t in state.values():
                torch.save(t, fh)

    ways = {"raw": w_raw, "save-nocrc": w_save_nocrc, "save": w_save, "dcp": w_dcp, "serialize": serialize}
    rates: dict[str, list[float]] = {k: [] for k in ways}
    try:
        for _ in range(args.repeat):
            for name, fn in ways.items():
                d = root / name
                d.mkdir()
                os.sync()
                t0 = time.perf_counter()
                fn(d)
                rates[name].append(nbytes / (time.perf_counter() - t0))
                shutil.rmtree(d)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in rates.items()}
    for k, v in rates.items():
        print(f"{k:11s} median {med[k] / units.MB:7.0f} MB/s   runs {[round(x / units.MB) for x in v]}")
    model = nbytes / dcp_write_time_s(nbytes, 1, 1, med["serialize"], nbytes / med["raw"])
    print(f"model       serialize + raw = {model / units.MB:.0f} MB/s; dcp measured {med['dcp'] / units.MB:.0f} MB/s "
          f"({med['dcp'] / model - 1:+.1%} against the model)")


if __name__ == "__main__":
    main()
