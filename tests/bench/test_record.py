"""Benchmark records are read through one schema: a malformed one is a SpecError naming file, field, rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from slowlink.bench.record import load_record
from slowlink.errors import SpecError

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
    assert rec["rows"][0]["ranks"] == 2  # extra columns (even a NaN no reader uses) are kept as written
    assert load_record(_write(tmp_path, [ROW]))["kind"] == "collectives"
    train = {"mode": "ddp", "ranks": 2, "step_time_s": 0.5}
    assert load_record(_write(tmp_path, [train]))["kind"] == "train"


def test_per_rank_times_are_optional_and_checked(tmp_path: Path) -> None:
    # A record written before per-rank times existed (no rank_time_s / rank_wait_s) still loads.
    old = load_record(_write(tmp_path, {"kind": "collectives", "rows": [ROW]}))
    assert "rank_time_s" not in old["rows"][0]
    new = {**ROW, "rank_time_s": [1e-3, 1e-3], "rank_wait_s": [1e-3, 0.0]}
    assert load_record(_write(tmp_path, {"kind": "collectives", "rows": [new]}))["rows"][0]["rank_wait_s"][1] == 0
    with pytest.raises(SpecError, match=r"rows.0: .*rank_wait_s has 1 values: must have one per rank \(2\)"):
        load_record(_write(tmp_path, {"kind": "collectives", "rows": [{**new, "rank_wait_s": [0.0]}]}))
    with pytest.raises(SpecError, match=r"rows.0.rank_time_s.1 \(0\): Input should be greater than 0"):
        load_record(_write(tmp_path, {"kind": "collectives", "rows": [{**new, "rank_time_s": [1e-3, 0]}]}))
