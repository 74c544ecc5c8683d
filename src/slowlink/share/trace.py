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
* ``philly-jobs``: the same jobs cut down to ``{id, num_gpus, runtime, attempts[].{start_time, end_time},
  submitted_time}`` (``runtime``: minutes from the first start to the last end), the layout of
  ``analysis/jobs.json`` in github.com/marwage/philly-traces (a fork of msr-fiddle/philly-traces), whose rows
  tests/data/share/philly_jobs_4gpu_pass.json ships. Every field is required: a cleaned file has no gaps.
  GPUs = ``num_gpus``; run time = the sum of the attempts' lengths, as for ``philly``.

Trace times carry no time zone; they are read as UTC wall-clock times, so that differences between them do
not depend on the zone (or its daylight-saving changes) of the machine that reads them.

Every malformed row is a :class:`SpecError` naming the file, the row and the field.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from datetime import UTC, datetime
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
        return datetime.strptime(str(value), _PHILLY_TIME).replace(tzinfo=UTC).timestamp()
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


def _json_list(path: Path, what: str) -> list[Any]:
    """The JSON list of jobs in ``path``; a file that is not JSON, or not a list, names itself and the rule."""
    try:
        data = json.loads(read_text(path, "trace.path"))
    except json.JSONDecodeError as exc:
        raise SpecError(f"{path}: not valid JSON at line {exc.lineno}: {exc.msg}") from None
    if not isinstance(data, list):
        raise SpecError(f"{path}: {what} is a JSON list of jobs, got {type(data).__name__}")
    return data


def read_philly(path: Path, limit: int | None = None) -> list[Job]:
    """The jobs of a Philly ``cluster_job_log`` (JSON list), arrivals from the first submission."""
    data = _json_list(path, "a Philly cluster_job_log")
    jobs = [j for i, e in enumerate(data) if (j := _philly_job(e, f"{path}: job {i}")) is not None]
    jobs.sort(key=lambda j: j.arrival_s)
    jobs = jobs[:limit] if limit else jobs
    t0 = jobs[0].arrival_s if jobs else 0.0
    return [Job(j.id, j.arrival_s - t0, j.gpus, j.duration_s, j.kind) for j in jobs]


@dataclass(frozen=True)
class TracedRun:
    """A job as its trace recorded it: submission and attempts in seconds (UTC epoch), GPUs."""

    id: str
    submitted_s: float
    gpus: int
    attempts: tuple[tuple[float, float], ...]

    @property
    def queue_s(self) -> float:
        """Submission to the first attempt's start: the queueing delay of the trace repository's notebook
        (msr-fiddle/philly-traces, ``Job.queueing_delay``)."""
        return self.attempts[0][0] - self.submitted_s

    @property
    def run_s(self) -> float:
        """Sum of the attempts' lengths: the time the job held its GPUs."""
        return sum(end - start for start, end in self.attempts)

    @property
    def span_s(self) -> float:
        """First attempt's start to the last one's end: the run time of the trace repository's notebook
        (``Job.run_time``, its re-plot of the paper's Figure 2)."""
        return self.attempts[-1][1] - self.attempts[0][0]


def _required(entry: dict[str, Any], key: str, where: str) -> Any:
    if key not in entry:
        raise SpecError(f"{where}: {key} is missing: a philly-jobs entry needs id, num_gpus, attempts and "
                        "submitted_time")
    return entry[key]


def _time(value: Any, where: str) -> float:
    t = _philly_time(value, where)
    if t is None:
        raise SpecError(f"{where} ({value!r}): must be a time written {_PHILLY_TIME}")
    return t


def _philly_jobs_entry(entry: Any, where: str) -> TracedRun:
    if not isinstance(entry, dict):
        raise SpecError(f"{where} ({type(entry).__name__}): must be an object with id, num_gpus, attempts and "
                        "submitted_time")
    gpus = _required(entry, "num_gpus", where)
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise SpecError(f"{where}.num_gpus ({gpus!r}): must be a whole number >= 1")
    attempts = _required(entry, "attempts", where)
    if not isinstance(attempts, list) or not attempts:
        raise SpecError(f"{where}.attempts ({attempts!r}): must be a non-empty list of attempts")
    spans = []
    for k, a in enumerate(attempts):
        at = f"{where}.attempts.{k}"
        if not isinstance(a, dict):
            raise SpecError(f"{at} ({a!r}): must be an object with start_time and end_time")
        start = _time(_required(a, "start_time", at), f"{at}.start_time")
        end = _time(_required(a, "end_time", at), f"{at}.end_time")
        if end < start:
            raise SpecError(f"{at}.end_time ({a['end_time']!r}): must not be before start_time ({a['start_time']!r})")
        spans.append((start, end))
    submitted = _time(_required(entry, "submitted_time", where), f"{where}.submitted_time")
    if spans[0][0] < submitted:
        raise SpecError(f"{where}.attempts.0.start_time ({attempts[0]['start_time']!r}): must not be before "
                        f"submitted_time ({entry['submitted_time']!r})")
    return TracedRun(str(_required(entry, "id", where)), submitted, gpus, tuple(spans))


def philly_jobs_runs(path: Path) -> list[TracedRun]:
    """The runs of a ``philly-jobs`` file as the trace recorded them, in submission order."""
    data = _json_list(path, "a philly-jobs file")
    runs = [_philly_jobs_entry(e, f"{path}: job {i}") for i, e in enumerate(data)]
    return sorted(runs, key=lambda r: r.submitted_s)


def read_philly_jobs(path: Path, limit: int | None = None) -> list[Job]:
    """The training jobs of a ``philly-jobs`` file, arrivals from the first submission; a run of zero length
    (an attempt that ended the second it started) is skipped."""
    runs = [r for r in philly_jobs_runs(path) if r.run_s > 0]
    runs = runs[:limit] if limit else runs
    t0 = runs[0].submitted_s if runs else 0.0
    return [Job(r.id, r.submitted_s - t0, r.gpus, r.run_s, "training") for r in runs]


def read_trace(path: Path, fmt: str, limit: int | None = None, unscheduled: bool = False) -> list[Job]:
    """Jobs of a trace file in format ``fmt`` (openb, philly or philly-jobs); a trace with no usable job is an
    error."""
    if fmt == "openb":
        jobs = read_openb(path, limit, unscheduled)
    else:
        jobs = read_philly(path, limit) if fmt == "philly" else read_philly_jobs(path, limit)
    if not jobs:
        raise SpecError(f"{path}: trace ({fmt}) has no job with GPUs and a complete run")
    return jobs
