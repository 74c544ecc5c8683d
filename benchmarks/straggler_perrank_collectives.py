"""Per-rank times of `bench collectives` (issue 18): does the time inside the collective name a late rank?

For 2, 3 and 4 gloo ranks on this machine, an all_reduce sweep (4 KiB to 1 MiB) runs healthy and then with
the last rank sleeping ``--delay-ms`` before every timed call (the SLOWLINK_BENCH_TEST_DELAY hook). Prints
every rank's lateness cost ``L / (T - L)`` (:func:`slowlink.bench.lateness.lateness`), the ranks
`find-slow --record` names, whether it named exactly the delayed rank (and nobody when healthy), and the
delayed rank's cost next to the measured one: the delayed sweep's time over the median healthy sweep's.
Exits 1 when a delayed rank is missed or a healthy run names one. Usage:
``python benchmarks/straggler_perrank_collectives.py [--delay-ms 2] [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys

from slowlink.bench.collectives import BenchConfig
from slowlink.bench.lateness import lateness
from slowlink.bench.launch import launch_local
from slowlink.bench.record import CollectiveRow, make_record
from slowlink.probe.find import late_ranks

TARGET = "slowlink.bench.collectives:sweep_rank"


def one(n: int, delay_s: float) -> tuple[list[float], list[str], float]:
    """Lateness cost per rank, the ranks named and the sweep's summed time_s, of one sweep (the last rank
    delayed when delay_s > 0)."""
    cfg = BenchConfig(op="all_reduce", sizes_bytes=(4096.0, 65536.0, 1048576.0), iters=12, warmup_iters=2,
                      rounds=3, check=False, test_delay_rank=n - 1 if delay_s else None, test_delay_s=delay_s)
    res = launch_local(TARGET, cfg, n, "gloo", 120)  # a RankRows
    rec = make_record("collectives", res.rows, {}, "gloo", res.hostnames)
    rows = [r for r in rec.rows if isinstance(r, CollectiveRow)]
    late = lateness(rows)
    assert late is not None
    return late.cost, [s.id for s in late_ranks(rows, res.hostnames)], sum(r.time_s for r in rows)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--delay-ms", type=float, default=2.0)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    bad = 0
    for n in (2, 3, 4):
        healthy: list[float] = []
        for delay in (0.0, args.delay_ms / 1e3):
            for _ in range(args.repeats):
                cost, named, total = one(n, delay)
                want = [f"rank {n - 1}"] if delay else []
                ok = named == want
                bad += not ok
                extra = ""
                if delay:
                    extra = (f"; measured {total / statistics.median(healthy) - 1:+.0%} against the healthy "
                             f"sweeps, rank {n - 1}'s cost {cost[-1]:+.0%}")
                else:
                    healthy.append(total)
                print(f"{n} ranks, delay {delay * 1e3:.1f} ms on rank {n - 1 if delay else '-'}: cost "
                      f"{' '.join(f'{c:+.0%}' for c in cost)}; named {named or 'none'} {'ok' if ok else 'WRONG'}"
                      f"{extra}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
