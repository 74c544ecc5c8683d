"""Golden test: the storage model against published checkpoints and MLPerf Storage v1.0 results."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from slowlink.cli.main import app
from slowlink.storage.validate import SIZE_TOLERANCE, TIME_TOLERANCE, StorageCase, cases


@pytest.mark.parametrize("case", [c for c in cases() if c.scored], ids=lambda c: f"{c.id}:{c.quantity}")
def test_within_tolerance(case: StorageCase) -> None:
    # Megatron 1T: Narayanan et al. SC'21 Sec. 5.10 (size 10%, save time 20%); MLPerf Storage: mlcommons/
    # storage_results_v1.0 Closed/DDN runs, per-accelerator read within 20% (sources in published_storage.yaml).
    assert abs(case.error) <= case.tolerance, (case.id, case.quantity, case.predicted, case.measured)


def test_cases_cover_size_time_and_mlperf() -> None:
    cs = cases()
    assert {c.tolerance for c in cs} == {SIZE_TOLERANCE, TIME_TOLERANCE}
    assert sum(c.id.startswith("mlperf-") for c in cs) == 6
    assert any(c.quantity.startswith("save time") for c in cs)


def test_validate_storage_prints_mean_and_max() -> None:
    res = CliRunner().invoke(app, ["validate", "storage"])
    assert res.exit_code == 0, res.output
    assert "storage error: mean" in res.output and "max" in res.output
