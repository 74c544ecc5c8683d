"""Trace readers: the Alibaba openb pod list and the Microsoft Philly job log, in their published formats
(format samples written for these tests: tests/data/share/README.md), and a replay of the sample."""

from __future__ import annotations

from pathlib import Path

import pytest

from slowlink.errors import SpecError
from slowlink.share.scenario import load_share
from slowlink.share.sim import simulate_share
from slowlink.share.trace import read_openb, read_philly, read_trace

DATA = Path(__file__).parents[1] / "data" / "share"


def test_openb_rows_become_jobs() -> None:
    jobs = {j.id: j for j in read_openb(DATA / "openb_format_sample.csv")}
    # the CPU-only pod (num_gpu 0) and the never-scheduled pod are skipped
    assert set(jobs) == {"fmt-pod-0000", "fmt-pod-0001", "fmt-pod-0002", "fmt-pod-0004", "fmt-pod-0006"}
    shared = jobs["fmt-pod-0001"]
    assert (shared.gpus, shared.compute_fraction, shared.kind, shared.arrival_s) == (1, 0.25, "inference", 60.0)
    big = jobs["fmt-pod-0002"]
    assert (big.gpus, big.duration_s, big.kind) == (8, 10920.0 - 300.0, "training")


def test_philly_jobs_sum_their_attempts() -> None:
    jobs = {j.id: j for j in read_philly(DATA / "philly_format_sample.json")}
    assert set(jobs) == {"application_fmt_0001", "application_fmt_0002"}  # no attempt / no end: skipped
    assert jobs["application_fmt_0001"].gpus == 16 and jobs["application_fmt_0001"].arrival_s == 0.0
    assert jobs["application_fmt_0002"].duration_s == pytest.approx(1200.0)
    assert jobs["application_fmt_0002"].arrival_s == pytest.approx(600.0)


def test_limit_keeps_the_first_jobs() -> None:
    assert [j.id for j in read_trace(DATA / "openb_format_sample.csv", "openb", 2)] == ["fmt-pod-0000",
                                                                                      "fmt-pod-0001"]


def test_a_bad_number_names_the_row_and_column(tmp_path: Path) -> None:
    text = (DATA / "openb_format_sample.csv").read_text().replace(",60,7200,60", ",sixty,7200,60")
    p = tmp_path / "bad.csv"
    p.write_text(text)
    with pytest.raises(SpecError, match=r"bad.csv:3: creation_time \('sixty'\): must be a number"):
        read_openb(p)


def test_a_csv_without_the_columns_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "other.csv"
    p.write_text("a,b\n1,2\n")
    with pytest.raises(SpecError, match="needs the columns name, num_gpu"):
        read_openb(p)


def test_the_sample_replays() -> None:
    spec, jobs, shape = load_share(DATA / "trace-openb-sample.yaml")
    res = simulate_share(spec, jobs, shape)
    assert res.jobs == 5
    assert all(p.finished == 5 for p in res.policies)


def test_fill_replay_submits_every_gpu_pod_in_order_and_keeps_them(tmp_path: Path) -> None:
    text = (DATA / "trace-openb-sample.yaml").read_text().replace("format: openb}", "format: openb, replay: fill}")
    p = tmp_path / "fill.yaml"
    p.write_text(text.replace("path: openb_format_sample.csv", f"path: {DATA / 'openb_format_sample.csv'}"))
    spec, jobs, shape = load_share(p)
    assert [j.arrival_s for j in jobs] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]  # the pending 2-GPU pod is in
    assert "fmt-pod-0005" in {j.id for j in jobs}
    res = simulate_share(spec, jobs, shape).policies[0]
    # 1 + 1 + 8 + 1 + 2 + 4 = 17 GPUs asked of 16, none leaving: the 4-GPU pod waits; 13 of 16 allocated
    assert res.allocated_at_last_arrival == pytest.approx(13 / 16)
