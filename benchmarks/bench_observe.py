"""Speed of the observe readers and the exporter (issue 17): an NCCL_DEBUG=INFO log of a 1,024-rank job (every
rank's init lines and 16 channel connections: ~21k lines) read in < 2 s; an nccl-tests sweep of 8 B .. 16 GiB
(two reductions, 60 rows) < 0.05 s; one exporter scrape of 64 result files < 1 s. Best of ``--repeat`` runs.
Exits 1 when a goal is missed. Run as ``python benchmarks/bench_observe.py [--repeat N]``."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from slowlink.bench.nccl_tests import parse_nccl_tests
from slowlink.observe.exporter import ResultsCollector
from slowlink.observe.nccl_log import parse_nccl_log

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "observe"
GOALS_S = {"nccl-log 1024 ranks": 2.0, "nccl-tests 60 rows": 0.05, "exporter scrape 64 files": 1.0}


def big_log(ranks: int = 1024, channels: int = 16) -> str:
    """Init lines, rings and one connection per channel for every rank, 8 ranks per host."""
    lines = ["NCCL version 2.21.5+cuda12.4"]
    for r in range(ranks):
        p = f"node{r // 8:04d}:{1000 + r}:{2000 + r} [{r % 8}] NCCL INFO"
        lines += [f"{p} NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.0.{r // 256}.{r % 256}<0>",
                  f"{p} Using network IB", f"{p} comm 0x55 rank {r} nRanks {ranks} nNodes {ranks // 8} "
                  "localRanks 8 localRank 0 MNNVL 0"]
        lines += [f"{p} Channel {c:02d}/0 : {r}[{r % 8}] -> {(r + 1) % ranks}[{(r + 1) % 8}] [send] via "
                  f"NET/IB/{c % 2}/GDRDMA" for c in range(channels)]
        lines += [f"{p} Connected all rings", f"{p} {channels} coll channels, 0 nvls channels, 32 p2p channels"]
    return "\n".join(lines) + "\n"


def big_table() -> str:
    head, *_ = (DATA / "nccl-tests-2.13-all_reduce-2x8-h100.txt").read_text().split("        1024")
    rows = [f"{8 * 2 ** k:12d}  {2 * 2 ** k:12d}     float  {op:>6s}      -1    48.01    0.02    0.04      0"
            f"    48.49    0.02    0.04      0" for op in ("sum", "max") for k in range(31)]
    return head + "\n".join(rows[:60]) + "\n"


def best_s(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    repeat = ap.parse_args().repeat
    log, table = big_log(), big_table()
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i in range(64):
            p = Path(tmp) / f"r{i}.txt"
            p.write_text((DATA / "nccl-tests-2.13-all_reduce-2x8-h100.txt").read_text())
            files.append(p)
        reg = CollectorRegistry()
        reg.register(ResultsCollector(files, files[0]))
        got = {"nccl-log 1024 ranks": best_s(lambda: parse_nccl_log(log, "big.log"), repeat),
               "nccl-tests 60 rows": best_s(lambda: parse_nccl_tests(table, "all_reduce_perf.txt"), repeat),
               "exporter scrape 64 files": best_s(lambda: generate_latest(reg), repeat)}
    print(f"nccl-log: {len(log.splitlines())} lines")
    missed = 0
    for name, s in got.items():
        ok = s < GOALS_S[name]
        missed += not ok
        print(f"{name}: {s:.3f} s (goal < {GOALS_S[name]:g} s) {'ok' if ok else 'MISSED'}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
