"""A Prometheus exporter of slowlink's measurements and plans, re-read at every scrape.

Inputs are result files (slowlink records, nccl-tests outputs), ``slowlink plan --json`` outputs, or folders
(the newest such file in each, by modification time, so a benchmark that writes into the folder updates the
metrics). With a baseline, each collective row also gets its baseline busbw and the ratio measured/baseline,
which the alert rules in ``monitoring/slowlink.rules.yml`` watch. Names follow Prometheus' naming guide
(prometheus.io/docs/practices/naming: base units, ``_seconds``, ``_bytes_per_second``, ``_ratio``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from slowlink import units
from slowlink.bench.record import (
    CollectiveRow,
    CollectivesRecord,
    Record,
    TrainRecord,
    TrainRow,
    load_record,
)
from slowlink.errors import SlowlinkError, SpecError

_SUFFIXES = (".json", ".txt", ".log", ".out")
_COLL = ("op", "size_bytes", "ranks")
_TRAIN = ("mode", "ranks")
_PLAN_KEYS = {"step_time_s": "step_time_seconds", "exposed_comm_s": "exposed_comm_seconds",
              "compute_s": "compute_seconds"}
_PLAN_STORAGE = {"data_stall_s": "data_stall_seconds", "checkpoint_write_s": "checkpoint_write_seconds"}


@dataclass(frozen=True)
class PlanPoint:
    """The predictions of a ``slowlink plan --json`` output that the exporter serves, seconds (None where the
    plan has no number: no storage section, say)."""

    step_time_s: float | None
    exposed_comm_s: float | None
    compute_s: float | None
    data_stall_s: float | None
    checkpoint_write_s: float | None

    @classmethod
    def of(cls, data: dict[str, Any]) -> PlanPoint:
        """From the parsed JSON: the step keys at its top level, the storage keys under ``storage``."""
        storage = data.get("storage")
        storage = storage if isinstance(storage, dict) else {}

        def num(where: dict[str, Any], key: str) -> float | None:
            v = where.get(key)
            return float(v) if isinstance(v, int | float) else None

        return cls(**{k: num(data, k) for k in _PLAN_KEYS}, **{k: num(storage, k) for k in _PLAN_STORAGE})


@dataclass(frozen=True)
class Loaded:
    """One input as read: a record (collectives/compute/train) or a plan, with its file and time."""

    source: str
    mtime_s: float
    record: Record | None = None
    plan: PlanPoint | None = None


def newest(path: Path) -> Path | None:
    """``path`` itself, or for a folder its newest result-like file (None when it has none)."""
    if not path.is_dir():
        return path
    files = [p for p in path.iterdir() if p.is_file() and p.suffix in _SUFFIXES]
    return max(files, key=lambda p: p.stat().st_mtime, default=None)


def load(path: Path) -> Loaded:
    """A result or a plan file (``slowlink plan --json``: one cluster's dict with ``step_time_s``)."""
    mtime = path.stat().st_mtime if path.exists() else 0.0
    text = path.read_text(errors="replace") if path.is_file() else ""
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict) and "kind" not in data and "step_time_s" in data:
            return Loaded(str(path), mtime, plan=PlanPoint.of(data))
    return Loaded(str(path), mtime, record=load_record(path))


def _coll_rows(rec: Record) -> dict[tuple[str, ...], CollectiveRow]:
    """A collectives record's rows by their labels (op, size_bytes, ranks); {} for another kind."""
    if not isinstance(rec, CollectivesRecord):
        return {}
    return {(r.op, str(int(r.size_bytes)), str(r.ranks)): r for r in rec.rows}


def _train_rows(rec: Record) -> dict[tuple[str, ...], TrainRow]:
    """A train record's rows by their labels (mode, ranks); {} for another kind."""
    if not isinstance(rec, TrainRecord):
        return {}
    return {(r.mode, str(r.ranks)): r for r in rec.rows}


def _gauge(name: str, doc: str, labels: tuple[str, ...]) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"slowlink_{name}", doc, labels=list(labels))


def collective_families(recs: list[Record], base: Record | None) -> list[Metric]:
    """busbw and time per (op, size, ranks) of the inputs' collectives rows; with a baseline, its busbw and
    the ratio measured/baseline (< 1: slower). A later input overrides an earlier one with the same key."""
    busbw = _gauge("collective_busbw_bytes_per_second", "Measured bus bandwidth (nccl-tests convention).", _COLL)
    time = _gauge("collective_time_seconds", "Measured time per operation (out-of-place).", _COLL)
    fams: list[Metric] = [busbw, time]
    rows: dict[tuple[str, ...], CollectiveRow] = {}
    for rec in recs:
        rows.update(_coll_rows(rec))
    for key, r in rows.items():
        busbw.add_metric(list(key), r.busbw_gbyte_s * units.GB)
        time.add_metric(list(key), r.time_s)
    if base is not None:
        b_bw = _gauge("collective_baseline_busbw_bytes_per_second", "Baseline bus bandwidth.", _COLL)
        ratio = _gauge("collective_busbw_ratio", "Measured busbw / baseline busbw (< 1: slower).", _COLL)
        top = _gauge("collective_largest_busbw_ratio", "busbw ratio at the largest size both share: the "
                     "bandwidth-bound end of a sweep, past the small sizes' latency noise.", ("op", "ranks"))
        largest: dict[tuple[str, str], tuple[int, float]] = {}
        for key, b in _coll_rows(base).items():
            b_bw.add_metric(list(key), b.busbw_gbyte_s * units.GB)
            if key in rows and b.busbw_gbyte_s > 0:
                share = rows[key].busbw_gbyte_s / b.busbw_gbyte_s
                ratio.add_metric(list(key), share)
                size, group = int(key[1]), (key[0], key[2])
                if size >= largest.get(group, (-1, 0.0))[0]:
                    largest[group] = (size, share)
        for (op, ranks), (_, share) in largest.items():
            top.add_metric([op, ranks], share)
        fams += [b_bw, ratio, top]
    return fams


def train_families(recs: list[Record], base: Record | None) -> list[Metric]:
    """Mean step time per (mode, ranks) of train records; with a baseline, the ratio measured/baseline."""
    step = _gauge("train_step_time_seconds", "Measured mean training step time.", _TRAIN)
    rows: dict[tuple[str, ...], TrainRow] = {}
    for rec in recs:
        rows.update(_train_rows(rec))
    for key, r in rows.items():
        step.add_metric(list(key), r.step_time_s)
    fams: list[Metric] = [step]
    if base is not None:
        ratio = _gauge("train_step_time_ratio", "Measured step time / baseline step time (> 1: slower).", _TRAIN)
        for key, b in _train_rows(base).items():
            if key in rows:
                ratio.add_metric(list(key), rows[key].step_time_s / b.step_time_s)
        fams.append(ratio)
    return fams


def plan_families(plans: list[tuple[str, PlanPoint]]) -> list[Metric]:
    """The model's predictions (``slowlink plan --json``): step time, exposed comm, data stall, checkpoint."""
    fams = {k: _gauge(f"plan_{v}", f"Predicted {v.replace('_', ' ')} (slowlink plan).", ("plan",))
            for k, v in {**_PLAN_KEYS, **_PLAN_STORAGE}.items()}
    for name, plan in plans:
        for k, fam in fams.items():
            value = getattr(plan, k)
            if value is not None:
                fam.add_metric([name], value)
    return list(fams.values())


class ResultsCollector(Collector):
    """Re-reads every input at each scrape; an unreadable input (half written) reports ``input_up 0``."""

    def __init__(self, inputs: list[Path], baseline: Path | None = None) -> None:
        self.inputs = inputs
        self.baseline = baseline

    def collect(self) -> Iterator[Metric]:
        up = _gauge("input_up", "1 when the input was read, 0 when it could not be.", ("input",))
        stamp = _gauge("result_timestamp_seconds", "Modification time of the input read.", ("input",))
        recs: list[Record] = []
        plans: list[tuple[str, PlanPoint]] = []
        for path in self.inputs:
            target = newest(path)
            try:
                if target is None:
                    raise SpecError(f"{path}: no result file yet")
                got = load(target)
            except (SlowlinkError, OSError):
                up.add_metric([str(path)], 0.0)
                continue
            up.add_metric([str(path)], 1.0)
            stamp.add_metric([str(path)], got.mtime_s)
            if got.record is not None:
                recs.append(got.record)
            if got.plan is not None:
                plans.append((Path(got.source).stem, got.plan))
        base = self._base()
        yield from (up, stamp, *collective_families(recs, base), *train_families(recs, base), *plan_families(plans))

    def _base(self) -> Record | None:
        if self.baseline is None:
            return None
        try:
            return load_record(self.baseline)
        except SlowlinkError:
            return None


def check_inputs(inputs: list[Path], baseline: Path | None) -> None:
    """Refuse, before serving, inputs that do not exist and files that do not read (exit 2 from the CLI)."""
    if not inputs:
        raise SpecError("exporter: INPUTS (none) must name at least one result file or folder")
    for p in inputs:
        if not p.exists():
            raise SpecError(f"exporter input ({str(p)!r}) does not exist")
        if p.is_file():
            load(p)
    if baseline is not None:
        load_record(baseline)


def serve(port: int, inputs: list[Path], baseline: Path | None, addr: str = "127.0.0.1") -> Any:
    """Start the HTTP server on ``addr:port`` in a thread; return the server (``shutdown()`` stops it)."""
    from prometheus_client import CollectorRegistry, start_http_server

    if not 0 <= port <= 65535:
        raise SpecError(f"--port ({port}) must be between 0 and 65535")
    check_inputs(inputs, baseline)
    registry = CollectorRegistry()
    registry.register(ResultsCollector(inputs, baseline))
    try:
        server, _thread = start_http_server(port, addr=addr, registry=registry)
    except OSError as exc:
        raise SpecError(f"--port ({port}) cannot be listened on at {addr}: {exc.strerror}") from None
    return server
