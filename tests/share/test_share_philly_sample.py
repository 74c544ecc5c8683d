"""The real Philly sample shipped in tests/data/share (philly_jobs_4gpu_pass.json, source and licence in the
README there): the ``philly-jobs`` reader against values read by hand from the file, every bad entry named,
and its replay (docs/share.md, "Replaying a public trace")."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from slowlink.errors import SpecError
from slowlink.share.scenario import check_share, load_share
from slowlink.share.sim import simulate_share
from slowlink.share.trace import TracedRun, philly_jobs_runs, read_philly_jobs, read_trace

DATA = Path(__file__).parents[1] / "data" / "share"
SAMPLE = DATA / "philly_jobs_4gpu_pass.json"
SCENARIO = Path(__file__).parents[2] / "examples" / "share-philly-trace.yaml"


@pytest.fixture(scope="module")
def runs() -> dict[str, TracedRun]:
    return {r.id: r for r in philly_jobs_runs(SAMPLE)}


def test_the_first_entry_read_by_hand(runs: dict[str, TracedRun]) -> None:
    # line 2 of the file: submitted 2017-10-07 01:11:39, attempts 01:12:09-01:13:23 and
    # 01:13:30-2017-10-09 06:53:12, 8 GPUs, runtime 3221.05 (minutes, first start to last end)
    r = runs["application_1506638472019_14199"]
    assert r.gpus == 8
    assert r.queue_s == 30.0
    assert r.run_s == 74.0 + 2 * 86400 + 5 * 3600 + 39 * 60 + 42
    assert r.span_s / 60 == pytest.approx(3221.05)


def test_every_runtime_column_matches_the_attempts(runs: dict[str, TracedRun]) -> None:
    # the file's own runtime column (minutes) is first start to last end: our times must reproduce it
    entries = {e["id"]: e for e in json.loads(SAMPLE.read_text())}
    assert len(entries) == len(runs) == 3034
    off = [i for i, r in runs.items() if abs(r.span_s / 60 - entries[i]["runtime"]) > 1e-6]
    assert off == []


def test_the_gpu_mix_counted_by_grep() -> None:
    # grep -c '"num_gpus": 4,' philly_jobs_4gpu_pass.json gives 1457, and so on for each count
    assert Counter(r.gpus for r in philly_jobs_runs(SAMPLE)) == {
        4: 1457, 7: 1, 8: 1353, 12: 4, 16: 148, 20: 1, 24: 3, 32: 61, 64: 4, 128: 2}


def test_jobs_arrive_from_the_first_submission() -> None:
    jobs = read_trace(SAMPLE, "philly-jobs")
    assert len(jobs) == 3034 and jobs[0].arrival_s == 0.0
    # the earliest submission in the file is 2017-09-04 10:30:41, the latest 2017-12-22 04:44:24:
    # 108 days 18:13:43 apart
    assert max(j.arrival_s for j in jobs) == 108 * 86400 + 18 * 3600 + 13 * 60 + 43
    assert [j.arrival_s for j in jobs] == sorted(j.arrival_s for j in jobs)
    assert read_philly_jobs(SAMPLE, limit=5) == jobs[:5]


def test_times_do_not_depend_on_the_time_zone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 2017-11-05 01:00-03:00 wall clock is 2 h, but 3 h in US Pacific time (daylight saving ends at 02:00)
    p = tmp_path / "dst.json"
    p.write_text(json.dumps([{"id": "a", "num_gpus": 4, "submitted_time": "2017-11-05 00:59:00",
                              "attempts": [{"start_time": "2017-11-05 01:00:00", "end_time": "2017-11-05 03:00:00"}]}]))
    monkeypatch.setenv("TZ", "America/Los_Angeles")
    time.tzset()
    try:
        assert read_philly_jobs(p)[0].duration_s == 7200.0
    finally:
        monkeypatch.undo()
        time.tzset()


@pytest.mark.parametrize(("entry", "message"), [
    ({"id": "a", "num_gpus": "8", "submitted_time": "2017-10-01 00:00:00",
      "attempts": [{"start_time": "2017-10-01 00:00:00", "end_time": "2017-10-01 01:00:00"}]},
     r"job 0.num_gpus \('8'\): must be a whole number >= 1"),
    ({"id": "a", "num_gpus": 8, "attempts": [{"start_time": "2017-10-01 00:00:00", "end_time": "2017-10-01 01:00:00"}]},
     "job 0: submitted_time is missing"),
    ({"id": "a", "num_gpus": 8, "submitted_time": "2017-10-01 00:00:00",
      "attempts": [{"start_time": "2017-10-01 02:00:00", "end_time": "2017-10-01 01:00:00"}]},
     r"job 0.attempts.0.end_time \('2017-10-01 01:00:00'\): must not be before start_time"),
    ({"id": "a", "num_gpus": 8, "submitted_time": "2017-10-01 00:00:00",
      "attempts": [{"start_time": "None", "end_time": "2017-10-01 01:00:00"}]},
     r"job 0.attempts.0.start_time \('None'\): must be a time written"),
    ({"id": "a", "num_gpus": 8, "submitted_time": "2017-10-01 03:00:00",
      "attempts": [{"start_time": "2017-10-01 02:00:00", "end_time": "2017-10-01 04:00:00"}]},
     r"job 0.attempts.0.start_time \('2017-10-01 02:00:00'\): must not be before submitted_time"),
    ({"id": "a", "num_gpus": 8, "submitted_time": "2017-10-01 00:00:00", "attempts": []},
     r"job 0.attempts \(\[\]\): must be a non-empty list"),
])
def test_a_bad_entry_names_the_job_field_value_and_rule(tmp_path: Path, entry: dict, message: str) -> None:
    p = tmp_path / "bad.json"
    p.write_text(json.dumps([entry]))
    with pytest.raises(SpecError, match=message):
        read_philly_jobs(p)


def test_the_replay_on_phillys_8_gpu_servers_never_queues_and_is_deterministic() -> None:
    spec, jobs, shape = load_share(SCENARIO)
    assert shape.gpus == 231 * 8
    a, b = simulate_share(spec, jobs, shape), simulate_share(spec, jobs, shape)
    assert a.to_json() == b.to_json()
    reseeded = replace(spec, seed=7)  # a trace replay draws nothing: the seed changes nothing
    assert simulate_share(reseeded, jobs, shape).to_json() == a.to_json()
    gang = a.policies[0]
    assert gang.finished == 3034 and gang.mean_queue_s == 0.0
    # nothing waits or slows, so utilisation is the sample's GPU-seconds over the cluster's during the makespan
    gpu_s = sum(j.gpus * j.duration_s for j in jobs)
    makespan = max(j.arrival_s + j.duration_s for j in jobs)
    assert gang.utilisation == pytest.approx(gpu_s / (shape.gpus * makespan), rel=1e-5)


def test_fewer_servers_make_the_sample_queue() -> None:
    spec, jobs, _ = load_share(SCENARIO)
    small = replace(spec, nodes=64)
    res = simulate_share(small, jobs, check_share(small, jobs, "test"))
    assert all(p.finished == 3034 and p.mean_queue_s > 0 for p in res.policies)


def test_the_recorded_queueing_quoted_in_the_docs(runs: dict[str, TracedRun]) -> None:
    # docs/share.md, "The Philly sample next to its paper": p50 57 s, p95 7,753 s, mean 3,710 s
    queue = np.array([r.queue_s for r in runs.values()])
    assert np.percentile(queue, 50) == 57.0
    assert np.percentile(queue, 95) == pytest.approx(7753, abs=1)
    assert queue.mean() == pytest.approx(3710, abs=1)
