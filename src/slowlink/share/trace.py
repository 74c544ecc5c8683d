"""Public GPU-cluster traces read into :class:`~slowlink.share.jobs.Job` lists, in their published formats.

* ``openb``: Alibaba ``cluster-trace-gpu-v2023`` ``openb_pod_list_*.csv`` (Weng et al., "Beware of
  Fragmentation", USENIX ATC '23): one pod per row with ``num_gpu``, ``gpu_milli`` (thousandths of one GPU for
  GPU-sharing pods), ``qos``, ``creation_time``, ``scheduled_time``, ``deletion_time`` (seconds).
  Arrival = creation_time; run time = deletion_time - scheduled_time; pods without GPUs, or never scheduled,
  are skipped; compute_fraction = gpu_milli / 1000; kind: qos ``LS`` (latency-sensitive) -> inference, the
  rest -> training (the trace names no job kind: an assumption of this reader).
* ``philly``: Microsoft Philly ``cluster_job_log`` (Jeon et al., USENIX ATC '19; msr-fiddle/philly-traces):
  a JSON list of jobs with ``submitted_time`` and ``attempts[].{start_time, end_time, detail[].gpus}``.
  GPUs = those of the first attempt; run time = the sum of the attempts' lengths; jobs with no complete
  attempt are skipped.

Every malformed row is a :class:`SpecError` naming the file, the row and the field.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime
from pathlib import Path
from typing import Any

from slowlink.errors import SpecError
from slowlink.fileio import read_text
from slowlink.share.jobs import Job, Kind

OPENB_COLUMNS = ("name", "num_gpu", "gpu_milli", "qos", "creation_time", "deletion_time", "scheduled_time")
_PHILLY_TIME = "%Y-%m-%d %H:%M:%S"


def _number(value: str, where: str) -> float | None:
    if value.strip() == "":
        return None
    try:
        return float(value)
    except ValueError:
        raise SpecError(f"{where} ({value!r}): must be a number") from None


def _openb_row(row: dict[str, str], where: str, unscheduled: bool) -> Job | None:
    num = {c: _number(row[c], f"{where}: {c}") for c in OPENB_COLUMNS[1:] if c != "qos"}
    gpus, created, sched, deleted = num["num_gpu"], num["creation_time"], num["scheduled_time"], num["deletion_time"]
    if not gpus or created is None:
        return None
    if sched is None or deleted is None or deleted <= sched:
        if not unscheduled:
            return None
        sched, deleted = created, created + 1.0  # a fill replay sets its own run time
    milli = num["gpu_milli"] or 1000.0
    if not 0 < milli <= 1000:
        raise SpecError(f"{where}: gpu_milli ({row['gpu_milli']!r}): must be in (0, 1000]")
    kind: Kind = "inference" if row["qos"] == "LS" else "training"
    return Job(row["name"], created, int(gpus), deleted - sched, kind, milli / 1000.0 if gpus == 1 else 1.0)


def read_openb(path: Path, limit: int | None = None, unscheduled: bool = False) -> list[Job]:
    """The GPU pods of an Alibaba openb pod list (CSV), in submission order; with ``unscheduled``, also the
    pods that never ran (a fill replay submits every pod and sets run times itself)."""
    reader = csv.DictReader(io.StringIO(read_text(path, "trace.path")))
    missing = [c for c in OPENB_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise SpecError(f"{path}: trace.format openb needs the columns {', '.join(missing)} (header: "
                        f"{', '.join(reader.fieldnames or [])})")
    jobs = [j for n, row in enumerate(reader, start=2)
            if (j := _openb_row(row, f"{path}:{n}", unscheduled)) is not None]
    jobs.sort(key=lambda j: j.arrival_s)
    return jobs[:limit] if limit else jobs


def _philly_time(value: Any, where: str) -> float | None:
    if value is None or value == "None":
        return None
    try:
        return datetime.strptime(str(value), _PHILLY_TIME).timestamp()
    except ValueError:
        raise SpecError(f"{where} ({value!r}): must be a time written {_PHILLY_TIME}") from None


def _philly_job(entry: Any, where: str) -> Job | None:
    if not isinstance(entry, dict) or "jobid" not in entry or "attempts" not in entry:
        raise SpecError(f"{where}: must be a job with jobid, submitted_time and attempts")
    submitted = _philly_time(entry.get("submitted_time"), f"{where}.submitted_time")
    attempts = entry["attempts"] or []
    if submitted is None or not attempts:
        return None
    gpus = sum(len(d.get("gpus", [])) for d in attempts[0].get("detail", []))
    run = 0.0
    for k, a in enumerate(attempts):
        start = _philly_time(a.get("start_time"), f"{where}.attempts.{k}.start_time")
        end = _philly_time(a.get("end_time"), f"{where}.attempts.{k}.end_time")
        if start is not None and end is not None and end > start:
            run += end - start
    if gpus == 0 or run <= 0:
        return None
    return Job(str(entry["jobid"]), submitted, gpus, run, "training")


def read_philly(path: Path, limit: int | None = None) -> list[Job]:
    """The jobs of a Philly ``cluster_job_log`` (JSON list), arrivals from the first submission."""
    try:
        data = json.loads(read_text(path, "trace.path"))
    except json.JSONDecodeError as exc:
        raise SpecError(f"{path}: not valid JSON at line {exc.lineno}: {exc.msg}") from None
    if not isinstance(data, list):
        raise SpecError(f"{path}: a Philly cluster_job_log is a JSON list of jobs, got {type(data).__name__}")
    jobs = [j for i, e in enumerate(data) if (j := _philly_job(e, f"{path}: job {i}")) is not None]
    jobs.sort(key=lambda j: j.arrival_s)
    jobs = jobs[:limit] if limit else jobs
    t0 = jobs[0].arrival_s if jobs else 0.0
    return [Job(j.id, j.arrival_s - t0, j.gpus, j.duration_s, j.kind) for j in jobs]


def read_trace(path: Path, fmt: str, limit: int | None = None, unscheduled: bool = False) -> list[Job]:
    """Jobs of a trace file in format ``fmt`` (openb or philly); a trace with no usable job is an error."""
    jobs = read_openb(path, limit, unscheduled) if fmt == "openb" else read_philly(path, limit)
    if not jobs:
        raise SpecError(f"{path}: trace ({fmt}) has no job with GPUs and a complete run")
    return jobs
