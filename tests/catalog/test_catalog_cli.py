"""slowlink catalog: a section of many keys is drawn one column per entry, its sources in a table of their own, so
that no table is wider than a pipe's 120 columns (the GPU section was 200: issue 39)."""

from __future__ import annotations

from typer.testing import CliRunner

from slowlink.cli.main import app


def test_no_catalog_table_is_wider_than_120_columns() -> None:
    res = CliRunner().invoke(app, ["catalog"])
    assert res.exit_code == 0, res.output
    assert max(len(line) for line in res.stdout.splitlines()) <= 120
    assert "catalog: GPUs (8): sources" in res.stdout and "| bf16_tflops " in res.stdout
    assert "| h100-sxm  | NVIDIA H100" in res.stdout  # a source beside its GPU's name


def test_without_sources_one_table_per_section() -> None:
    res = CliRunner().invoke(app, ["catalog", "gpus", "--no-sources"])
    assert res.exit_code == 0 and "sources" not in res.stdout and "datasheet" not in res.stdout


def test_a_section_too_wide_for_one_table_is_split_by_columns() -> None:
    res = CliRunner().invoke(app, ["catalog", "gpus", "--no-sources"])
    assert res.exit_code == 0, res.output
    assert res.stdout.count("catalog: GPUs (8)") == 2  # 8 GPUs do not fit 120 columns side by side
    assert "mi300x" in res.stdout and max(len(line) for line in res.stdout.splitlines()) <= 120
