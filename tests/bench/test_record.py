"""Benchmark records are read through one schema: a malformed one is a SpecError naming file, field, rule."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from rich.console import Console

from slowlink.bench.compare import save_baseline
from slowlink.bench.record import (
    CheckpointRow,
    CollectiveRow,
    CollectivesRecord,
    StorageRow,
    TrainRecord,
    TrainRow,
    check_record,
    load_record,
    make_record,
    write_record,
)
from slowlink.errors import SpecError
from slowlink.report.bench import profile_table, train_table
from slowlink.report.storage_bench import checkpoint_bench_table, storage_bench_table

ROW = {"op": "all_reduce", "size_bytes": 1048576, "ranks": 2, "time_s": 1e-3, "busbw_gbyte_s": 1.0}


def _write(tmp_path: Path, data: Any) -> Path:
    p = tmp_path / "r.json"
    p.write_text(json.dumps(data))
    return p


@pytest.mark.parametrize(("row", "expected"), [
    ({k: v for k, v in ROW.items() if k != "ranks"}, r"r.json: rows.0.ranks: required key is missing"),
    ({**ROW, "size_bytes": "big"}, r"r.json: rows.0.size_bytes \('big'\): must be a number"),
    ({**ROW, "ranks": True}, r"r.json: rows.0.ranks \(True\): must be an integer"),
    ({**ROW, "time_s": 0}, r"r.json: rows.0.time_s \(0\): Input should be greater than 0"),
    (7, r"r.json: rows.0 \(7\): must be a mapping of keys"),
])
def test_malformed_rows(tmp_path: Path, row: Any, expected: str) -> None:
    with pytest.raises(SpecError, match=expected):
        load_record(_write(tmp_path, {"kind": "collectives", "env": {}, "config": {}, "rows": [row]}))


def test_unknown_kind_and_empty_rows(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"kind \('gemm'\) must be one of collectives, compute, train"):
        load_record(_write(tmp_path, {"kind": "gemm", "rows": [ROW]}))
    with pytest.raises(SpecError, match=r"rows \(\[\]\): List should have at least 1 item"):
        load_record(_write(tmp_path, {"kind": "collectives", "rows": []}))


def test_binary_and_nan_in_a_used_column(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    p.write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(SpecError, match=r"r.json: not a text file"):
        load_record(p)
    p.write_text('{"kind": "collectives", "rows": [{"op": "all_reduce", "size_bytes": 8, "ranks": 2, '
                 '"time_s": NaN, "busbw_gbyte_s": 1}]}')
    with pytest.raises(SpecError, match=r"rows.0.time_s \(nan\): must be a finite number"):
        load_record(p)


def test_good_records_and_bare_rows_load(tmp_path: Path) -> None:
    rec = load_record(_write(tmp_path, {"kind": "collectives", "env": {"hostnames": ["a"]}, "config": {},
                                        "rows": [{**ROW, "algbw_gbyte_s": float("nan"), "in_place": None}]}))
    assert rec.rows[0].ranks == 2  # columns only shown (even a NaN) are kept as written
    assert math.isnan(rec.to_json()["rows"][0]["algbw_gbyte_s"])
    assert load_record(_write(tmp_path, [ROW])).kind == "collectives"
    train = {"mode": "ddp", "ranks": 2, "step_time_s": 0.5}
    assert isinstance(load_record(_write(tmp_path, [train])), TrainRecord)


def test_per_rank_times_are_optional_and_checked(tmp_path: Path) -> None:
    # A record written before per-rank times existed (no rank_time_s / rank_wait_s) still loads.
    old = load_record(_write(tmp_path, {"kind": "collectives", "rows": [ROW]}))
    assert isinstance(old, CollectivesRecord) and old.rows[0].rank_time_s is None
    assert "rank_time_s" not in old.to_json()["rows"][0]
    new = {**ROW, "rank_time_s": [1e-3, 1e-3], "rank_wait_s": [1e-3, 0.0]}
    got = load_record(_write(tmp_path, {"kind": "collectives", "rows": [new]}))
    assert isinstance(got, CollectivesRecord) and got.rows[0].rank_wait_s == [1e-3, 0.0]
    with pytest.raises(SpecError, match=r"rows.0: .*rank_wait_s has 1 values: must have one per rank \(2\)"):
        load_record(_write(tmp_path, {"kind": "collectives", "rows": [{**new, "rank_wait_s": [0.0]}]}))
    with pytest.raises(SpecError, match=r"rows.0.rank_time_s.1 \(0\): Input should be greater than 0"):
        load_record(_write(tmp_path, {"kind": "collectives", "rows": [{**new, "rank_time_s": [1e-3, 0]}]}))


DATA = Path(__file__).parents[1] / "data"
# Records the writer (make_record + write_record) wrote before readers got typed records: a gloo collectives
# sweep with per-rank times, a compute run with its summary, train runs with and without a profile.
WRITTEN = sorted((DATA / "bench").glob("*.json"))


@pytest.mark.parametrize("path", WRITTEN, ids=lambda p: p.stem)
def test_a_written_record_round_trips_byte_for_byte(tmp_path: Path, path: Path) -> None:
    rec = load_record(path)
    text = path.read_text()
    assert json.dumps(rec.to_json(), indent=2) + "\n" == text
    again = load_record(write_record(rec, tmp_path, "again"))
    assert again == rec and (tmp_path / next(p.name for p in tmp_path.iterdir())).read_text() == text
    with pytest.raises(ValidationError, match="frozen"):
        rec.kind = "train"  # type: ignore[misc]


def test_records_are_typed_by_kind() -> None:
    coll = load_record(DATA / "bench" / "collectives-gloo-2ranks.json")
    assert isinstance(coll, CollectivesRecord) and coll.hosts == ["vm", "vm"] and coll.env.backend == "gloo"
    row = coll.rows[0]
    assert isinstance(row, CollectiveRow) and row.measured_ranks and row.size_bytes == 1024
    assert isinstance(row.size_bytes, int)  # as written: compare's key reads "1024 B", not "1024.0 B"
    assert row.in_place is not None and row.in_place.wrong == 0 and row.count == 256
    train = load_record(DATA / "bench" / "train-ddp-profile.json")
    assert isinstance(train, TrainRecord) and isinstance(train.rows[0], TrainRow)
    assert train.rows[0].profile is not None and train.rows[0].profile.wall_s > 0
    assert train.rows[0].rank_compute_s is not None and len(train.rows[0].rank_compute_s) == 2
    assert load_record(DATA / "bench" / "compute-cpu.json").env.torch == "2.13.0+cpu"


def test_a_saved_baseline_is_the_record_plus_its_name(tmp_path: Path) -> None:
    src = DATA / "bench" / "collectives-gloo-2ranks.json"
    saved = json.loads(save_baseline("b1", src, tmp_path).read_text())
    assert saved.pop("baseline")["name"] == "b1" and saved == json.loads(src.read_text())
    nccl = DATA / "observe" / "nccl-tests-2.13-all_reduce-2x8-h100.txt"
    saved = json.loads(save_baseline("b2", nccl, tmp_path).read_text())
    saved.pop("baseline")
    assert saved == load_record(nccl).to_json()
    assert load_record(tmp_path / "b2.json").rows == load_record(nccl).rows


def test_a_bad_rank_compute_time_is_refused(tmp_path: Path) -> None:
    row = {"mode": "ddp", "ranks": 2, "step_time_s": 1.0, "rank_compute_s": [0.1, -0.1]}
    with pytest.raises(SpecError, match=r"r.json: rows.0.rank_compute_s.1 \(-0.1\): Input should be greater than 0"):
        load_record(_write(tmp_path, {"kind": "train", "rows": [row]}))


def test_make_record_checks_what_the_file_will_hold(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    rec = make_record("collectives", [ROW], {"op": "all_reduce"}, "gloo", ["h0", "h1"])
    assert isinstance(rec, CollectivesRecord) and rec.hosts == ["h0", "h1"] and rec.env.torch
    assert load_record(write_record(rec, tmp_path, "x")) == rec
    with pytest.raises(SpecError, match=r"the collectives record: rows.0.time_s \(0\): Input should be greater"):
        make_record("collectives", [{**ROW, "time_s": 0}], {}, "gloo")


def _text(table: Any) -> str:
    console = Console(width=250, record=True, file=io.StringIO(), color_system=None)
    console.print(table)
    return console.export_text()


def test_tables_render_the_typed_rows_of_written_records() -> None:
    train = load_record(DATA / "bench" / "train-ddp-plan-profile.json")
    rows = [r for r in train.rows if isinstance(r, TrainRow)]
    text = _text(train_table(rows, "t"))
    assert "+10.5%" in text and "-62.3%" in text and "7.6%" in text  # plan error and MFU of each rank count
    assert rows[0].profile is not None and "4.15" in _text(profile_table(rows[0], rows[0].profile))
    store = load_record(DATA / "bench" / "storage-files-vs-shards.json")
    text = _text(storage_bench_table([r for r in store.rows if isinstance(r, StorageRow)], "s"))
    assert "12,775" in text and "per-file" in text and "+66%" in text
    ckpt = load_record(DATA / "bench" / "checkpoint-dcp-1-2ranks.json")
    text = _text(checkpoint_bench_table([r for r in ckpt.rows if isinstance(r, CheckpointRow)], "c"))
    assert "-90%" in text and "+106%" in text
    # A row without the shown columns (a hand-written record) renders n/a, not a KeyError.
    bare = check_record([{"layout": "files", "order": "sequential", "workers": 0, "files_per_s": 1.0,
                          "mbyte_s": 1.0}], "r.json")
    assert "n/a" in _text(storage_bench_table([r for r in bare.rows if isinstance(r, StorageRow)], "s"))
