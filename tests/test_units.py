"""slowlink.units: parsing sizes, rates, ratios and sweeps, nccl-tests' conventions."""

from __future__ import annotations

from typing import get_args

import pytest
from pydantic import BaseModel

from slowlink import units
from slowlink.spec.storage import CheckpointSpec
from slowlink.spec.workload import TrainingSpec


@pytest.mark.parametrize(("text", "value"), [
    ("8", 8.0), ("1KiB", 1024.0), ("1K", 1024.0), ("1KB", 1000.0), ("1.5 GiB", 1.5 * 2**30),
    ("64MiB", 64 * 2**20), ("1GB", 1e9), (4096, 4096.0),
])
def test_parse_size(text: str | int, value: float) -> None:
    assert units.parse_size(text) == value


@pytest.mark.parametrize("bad", ["1 parsec", "GiB", "-1", "", "1.2.3MiB"])
def test_parse_size_rejects(bad: str) -> None:
    with pytest.raises(ValueError, match="is not a size"):
        units.parse_size(bad)


def test_parse_rate_bits_and_bytes() -> None:
    assert units.parse_rate("400Gb/s") == 50e9
    assert units.parse_rate("50GByte/s") == 50e9
    assert units.parse_rate(200) == 25e9
    with pytest.raises(ValueError, match="is not a rate"):
        units.parse_rate("fast")


def test_parse_ratio() -> None:
    assert units.parse_ratio("4:1") == 4.0
    assert units.parse_ratio(7) == 7.0
    with pytest.raises(ValueError, match="must be a finite number >= 1"):
        units.parse_ratio("1:2")
    for bad in ("inf", "1e999", "0:1"):
        with pytest.raises(ValueError, match="finite number >= 1"):
            units.parse_ratio(bad)
    for no_uplink in ("1:0", "4:0.0"):  # was a ZeroDivisionError traceback (issue 39)
        with pytest.raises(ValueError, match=r"has no uplink .*must be > 0"):
            units.parse_ratio(no_uplink)


def test_counts_take_a_sign_and_are_refused_at_zero_or_below() -> None:
    assert units.parse_count("15T") == 15e12 and units.parse_count("+1.5e12") == 1.5e12
    for bad in ("-5", "0", "-1T"):  # "-5" was "must be a number" (issue 39)
        with pytest.raises(ValueError, match="must be > 0"):
            units.parse_count(bad)


def test_parse_sweep_like_nccl_tests() -> None:
    sizes = units.parse_sweep("8:8GiB:2")
    assert sizes[0] == 8 and sizes[-1] == 8 * 2**30 and len(sizes) == 31
    with pytest.raises(ValueError, match="MIN:MAX:FACTOR"):
        units.parse_sweep("8:64")
    with pytest.raises(ValueError, match="must be > 1"):
        units.parse_sweep("8:64:1")


def test_format_size() -> None:
    assert units.format_size(1024) == "1KiB"
    assert units.format_size(1.5 * 2**30) == "1.5GiB"
    assert units.format_size(12) == "12B"


def _literal_choices(model: type[BaseModel], field: str) -> set[str]:
    return {c for c in get_args(model.model_fields[field].annotation) if c != "training"}


@pytest.mark.parametrize(("model", "field"), [
    (TrainingSpec, "precision"), (TrainingSpec, "grad_comm_dtype"), (CheckpointSpec, "weights_dtype"),
])
def test_every_precision_a_spec_accepts_has_a_size(model: type[BaseModel], field: str) -> None:
    assert _literal_choices(model, field) <= set(units.PRECISION_BYTES)


def test_element_sizes_agree_with_torch() -> None:
    torch = pytest.importorskip("torch")
    for name, size in [*units.PRECISION_BYTES.items(), *units.DTYPE_BYTES.items()]:
        assert units.torch_dtype(torch, name).itemsize == size, name


def test_one_size_per_element_type() -> None:
    assert units.PRECISION_BYTES == {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0}
    assert units.DTYPE_BYTES["bf16"] == units.DTYPE_BYTES["bfloat16"] == units.DTYPE_BYTES["half"] == 2
    assert units.DTYPE_BYTES["float"] == units.DTYPE_BYTES["float32"] == 4 and units.DTYPE_BYTES["double"] == 8


def test_time_units() -> None:
    assert (units.MINUTE, units.HOUR, units.DAY) == (60.0, 3600.0, 86400.0)
    assert units.YEAR == 365.25 * units.DAY and units.YEAR / units.HOUR == 8766.0  # a Julian year
