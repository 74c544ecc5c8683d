"""Baselines and regressions: save a result under a name, compare a new one with it row by row, and
compare nodes with each other to find the slow one.

Each kind has one key and one metric per row: collectives (op, redop, type, size, ranks) -> time_s;
compute (m, n, k, dtype) -> tflops; train (mode, ranks) -> step_time_s; storage (layout, order, workers) ->
files_per_s; checkpoint (mode, ranks) -> blocking_s. The slowdown of a row is
result/baseline - 1 for times and baseline/result - 1 for throughputs; a row regresses when its slowdown
exceeds the tolerance of its size, and improves when it is faster by more than that.
"""

from __future__ import annotations

import datetime
import json
import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from slowlink import units
from slowlink.bench.lateness import lateness
from slowlink.bench.record import (
    CheckpointRow,
    CollectiveRow,
    ComputeRow,
    Record,
    Row,
    StorageRow,
    load_record,
)
from slowlink.errors import SpecError

DEFAULT_DIR = Path("baselines")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class Tolerance:
    """``default`` fraction, and (size_below_bytes, fraction) overrides; the smallest bound that fits wins."""

    default: float = 0.10
    by_size: tuple[tuple[float, float], ...] = ()

    def at(self, size_bytes: float | None) -> float:
        if size_bytes is not None:
            for bound, tol in sorted(self.by_size):
                if size_bytes < bound:
                    return tol
        return self.default


def parse_tolerance(default_pct: float, overrides: list[str]) -> Tolerance:
    """``--tolerance 10`` and ``--size-tolerance 64KiB:30`` (sizes below 64 KiB: 30%)."""
    if not 0 < default_pct < 1000:
        raise SpecError(f"--tolerance ({default_pct:g}) must be a percentage > 0")
    items = []
    for o in overrides:
        size, _, pct = o.partition(":")
        try:
            items.append((units.parse_size(size), float(pct) / 100))
        except ValueError:
            raise SpecError(f"--size-tolerance ({o!r}) must be SIZE:PERCENT, e.g. 64KiB:30") from None
        if items[-1][1] <= 0:
            raise SpecError(f"--size-tolerance ({o!r}): the percentage must be > 0")
    return Tolerance(default_pct / 100, tuple(items))


Status = Literal["regressed", "improved", "ok"]


@dataclass(frozen=True)
class Move:
    """One compared row: ``key`` (what was compared), its ``metric``, the ``baseline`` and ``result`` values,
    ``slowdown_pct`` (> 0: slower), ``change_pct`` (result / baseline - 1), ``tolerance_pct`` and ``status``;
    ``node`` when nodes are compared with each other."""

    key: str
    metric: str
    baseline: float
    result: float
    slowdown_pct: float
    change_pct: float
    tolerance_pct: float
    status: Status
    node: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "metric": self.metric, "baseline": self.baseline,
                               "result": self.result, "slowdown_pct": self.slowdown_pct,
                               "change_pct": self.change_pct, "tolerance_pct": self.tolerance_pct,
                               "status": self.status}
        if self.node is not None:
            out["node"] = self.node
        return out


def row_key(r: Row) -> tuple[str, str, bool, float | None]:
    """(key text, metric name, lower is better, size in bytes or None)."""
    if isinstance(r, CollectiveRow):
        return (f"{r.op} {r.redop} {r.type} {r.size_bytes} B x{r.ranks}", "time_s", True, float(r.size_bytes))
    if isinstance(r, ComputeRow):
        return f"gemm {r.m}x{r.n}x{r.k} {r.dtype}", "tflops", False, None
    if isinstance(r, StorageRow):
        return f"read {r.layout} {r.order} w{r.workers}", "files_per_s", False, None
    if isinstance(r, CheckpointRow):
        return f"checkpoint {r.mode} x{r.ranks}", "blocking_s", True, None
    return f"train {r.mode} x{r.ranks}", "step_time_s", True, None


def metrics(rec: Record) -> dict[str, tuple[str, bool, float | None, float]]:
    """key -> (metric, lower is better, size, value)."""
    out = {}
    for r in rec.rows:
        key, metric, lower, size = row_key(r)
        out[key] = (metric, lower, size, float(getattr(r, metric)))
    return out


def slowdown(base: float, value: float, lower_is_better: bool) -> float:
    """result/baseline - 1 for times, baseline/result - 1 for throughputs (> 0: slower)."""
    return value / base - 1.0 if lower_is_better else base / value - 1.0


def compare_records(base: Record, new: Record, tol: Tolerance) -> list[Move]:
    """One entry per key both records have: values, change, tolerance and status."""
    if base.kind != new.kind:
        raise SpecError(f"compare: baseline is a {base.kind} result, result is a {new.kind} result")
    bm, nm = metrics(base), metrics(new)
    common = [k for k in bm if k in nm]
    if not common:
        raise SpecError("compare: the baseline and the result share no rows (different ops, sizes or ranks)")
    moves = []
    for k in common:
        metric, lower, size, b = bm[k]
        v = nm[k][3]
        s = slowdown(b, v, lower)
        t = tol.at(size)
        status: Status = "regressed" if s > t else "improved" if s < -t else "ok"
        moves.append(Move(k, metric, b, v, 100 * s, 100 * (v / b - 1.0), 100 * t, status))
    return moves


def rank_nodes(rec: Record, tol: Tolerance) -> list[Move]:
    """The hosts (or, all on one host, the ranks) of one ``bench collectives`` record against the other ranks.

    In a collective every rank leaves together, so the record's per-rank times cannot tell them apart; the
    time each spent *inside* the calls can: a late rank waits less (:func:`slowlink.bench.lateness.lateness`).
    A host's slowdown is that of its latest rank, the loop's cost ``L / (T - L)``; above the tolerance it
    regressed. Metric: seconds per iteration inside the calls (mean over the rows), against the other ranks'
    median (the baseline column).
    """
    rows = [r for r in rec.rows if isinstance(r, CollectiveRow) and r.measured_ranks]
    late = lateness(rows)
    if late is None:
        raise SpecError("compare --nodes needs >= 2 results, or one `bench collectives` record (gloo, this "
                        "version) with rows.rank_wait_s of >= 2 ranks")
    n = len(late.wait_s)
    hosts = rec.hosts
    by = hosts if len(hosts) == n and len(set(hosts)) > 1 else [f"rank {i}" for i in range(n)]
    t = tol.at(None)
    moves = []
    for name in dict.fromkeys(by):
        worst = max((i for i, h in enumerate(by) if h == name), key=lambda i: late.cost[i])
        v, ref, s = late.wait_s[worst] / late.rows, late.ref_s[worst] / late.rows, late.cost[worst]
        who = name if name == f"rank {worst}" else f"{name}: rank {worst}"
        moves.append(Move(f"{who} waits inside the collective", "rank_wait_s", ref, v, 100 * s,
                          100 * (v / ref - 1.0) if ref > 0 else 0.0, 100 * t, "regressed" if s > t else "ok",
                          name))
    return moves


def compare_nodes(recs: list[tuple[str, Record]], tol: Tolerance) -> list[Move]:
    """Each node's rows against the median of all nodes; a node is slow when any row regresses. One record
    alone: its hosts or ranks against each other from their per-rank waits (:func:`rank_nodes`)."""
    if len(recs) == 1:
        return rank_nodes(recs[0][1], tol)
    if len(recs) < 2:
        raise SpecError(f"compare --nodes needs >= 2 results, got {len(recs)}")
    kinds = {r.kind for _, r in recs}
    if len(kinds) > 1:
        raise SpecError(f"compare --nodes: results are of different kinds ({', '.join(sorted(kinds))})")
    per = [metrics(r) for _, r in recs]
    keys = [k for k in per[0] if all(k in m for m in per)]
    if not keys:
        raise SpecError("compare --nodes: the results share no rows")
    moves = []
    for (name, _rec), m in zip(recs, per, strict=True):
        rows = []
        for k in keys:
            metric, lower, size, v = m[k]
            mid = statistics.median(x[k][3] for x in per)
            rows.append((slowdown(mid, v, lower), k, metric, mid, v, tol.at(size)))
        s, k, metric, mid, v, t = max(rows)
        moves.append(Move(f"{name}: {k}", metric, mid, v, 100 * s, 100 * (v / mid - 1.0), 100 * t,
                          "regressed" if s > t else "ok", name))
    return moves


def node_name(path: Path, rec: Record) -> str:
    hosts = rec.hosts
    return ",".join(sorted(set(hosts))) if hosts else path.stem


def save_baseline(name: str, result: Path, folder: Path = DEFAULT_DIR) -> Path:
    """Copy a result into ``folder/NAME.json`` with the name, the source and the time it was saved."""
    if not _NAME.match(name):
        raise SpecError(f"baseline name ({name!r}) must be letters, digits, '.', '_' or '-'")
    doc = load_record(result).to_json()
    doc["baseline"] = {"name": name, "source": str(result),
                       "saved_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(doc, indent=2, default=float) + "\n")
    return path


def resolve_baseline(name_or_path: str, folder: Path = DEFAULT_DIR) -> Path:
    """A path to a result file, or the name of a saved baseline in ``folder``."""
    p = Path(name_or_path)
    if p.is_file():
        return p
    saved = folder / f"{name_or_path}.json"
    if saved.is_file():
        return saved
    known = sorted(x.stem for x in folder.glob("*.json")) if folder.is_dir() else []
    raise SpecError(f"baseline ({name_or_path!r}) is neither a file nor a saved baseline in {folder}/"
                    f" (known: {', '.join(known) or 'none'})")
