"""Output formats every command shares: ``--csv`` (tables as CSV on stdout, the rest on stderr) and JSON that
names the slowlink version and the spec files it read, as resolved after ``--set``."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slowlink import __version__
from slowlink.cli.main import app

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
REF, W8 = str(EXAMPLES / "ref-64gpu.yaml"), str(EXAMPLES / "llama3-8b.yaml")


def _csv_tables(text: str) -> list[list[list[str]]]:
    """stdout of --csv split into tables (blank-line separated), '# title' lines dropped."""
    blocks = [b for b in text.strip().split("\n\n") if b.strip()]
    return [list(csv.reader(io.StringIO("\n".join(ln for ln in b.splitlines() if not ln.startswith("# ")))))
            for b in blocks]


def test_csv_plan_prints_the_table_and_nothing_else_on_stdout() -> None:
    res = runner.invoke(app, ["plan", REF, W8, "--csv"])
    assert res.exit_code == 0, res.output
    (table,) = _csv_tables(res.stdout)
    assert table[0] == ["cluster", "metric", "value"]  # tidy: one row per cluster x metric (issue 39)
    rows = {r[1]: r[2] for r in table[1:] if r[0] == "ref-64gpu"}
    assert float(rows["step time (s)"]) > 0
    assert 0 < float(rows["MFU (fraction)"]) < 1  # 50.1% was a display cell
    assert float(rows["tokens/s"]) > 1000  # no thousands separators
    assert float(rows["tp exposed (s)"]) <= float(rows["tp total (s)"])  # "0.435 / 0.439" split in two
    assert rows["checkpoints that fit"] == ""  # "-": no value
    assert "bottleneck" not in res.stdout.lower()  # the sentences go to stderr
    assert res.stderr.strip()


def test_csv_anywhere_on_the_line_and_a_sweep_has_one_row_per_size() -> None:
    res = runner.invoke(app, ["--csv", "collective", REF, "--op", "all_reduce", "--sweep", "1MiB:64MiB:4"])
    assert res.exit_code == 0, res.output
    (table,) = _csv_tables(res.stdout)
    header, *rows = table
    assert header[:3] == ["size", "count", "type"] and "busbw (GB/s)" in header
    assert [int(r[0]) for r in rows] == [2**20, 2**22, 2**24, 2**26]
    busbw = [float(r[header.index("busbw (GB/s)")]) for r in rows]
    assert busbw == sorted(busbw)  # bigger messages amortise latency


def test_csv_and_json_together_are_refused() -> None:
    res = runner.invoke(app, ["plan", REF, W8, "--csv", "--json"])
    assert res.exit_code == 2
    assert "--csv and --json" in res.output and "Traceback" not in res.output


def test_json_names_the_version_and_the_resolved_inputs() -> None:
    res = runner.invoke(app, ["plan", REF, W8, "--json", "--set", "workload.parallel.tp=4",
                              "--set", "workload.parallel.dp=auto"])
    assert res.exit_code == 0, res.output
    meta = json.loads(res.stdout)["slowlink"]
    assert meta["version"] == __version__
    by_kind = {i["kind"]: i for i in meta["inputs"]}
    assert by_kind["cluster"]["file"] == REF and by_kind["cluster"]["set"] == []
    assert by_kind["workload"]["set"] == ["workload.parallel.tp=4", "workload.parallel.dp=auto"]
    assert by_kind["workload"]["spec"]["parallel"]["tp"] == 4


def test_inputs_do_not_leak_from_one_command_to_the_next() -> None:
    runner.invoke(app, ["plan", REF, W8, "--json"])
    res = runner.invoke(app, ["collective", REF, "--op", "all_reduce", "--size", "1GiB", "--json"])
    assert res.exit_code == 0, res.output
    assert [i["kind"] for i in json.loads(res.stdout)["slowlink"]["inputs"]] == ["cluster"]


def test_validate_has_json_with_both_sets_and_their_errors() -> None:
    r = runner.invoke(app, ["validate", "--json"])
    assert r.exit_code == 0, r.output
    js = json.loads(r.stdout)
    for key, quantity in (("calibration", "step time (s)"), ("held_out", "MFU")):
        s = js[key]
        assert s["quantity"] == quantity and len(s["cases"]) > 5
        errors = [abs(c["predicted"] / c["measured"] - 1) for c in s["cases"]]
        assert s["mean_abs_error"] == pytest.approx(sum(errors) / len(errors), rel=1e-3)
        assert s["max_abs_error"] == pytest.approx(max(errors), rel=1e-3)
    gate = runner.invoke(app, ["validate", "--json", "--fail-above", "0.001"])
    assert gate.exit_code == 1 and json.loads(gate.stdout)["held_out"]["cases"]
    assert "--fail-above" in gate.stderr


@pytest.mark.parametrize("args", [
    ["plan", REF, W8], ["plan", REF, str(EXAMPLES / "ref-64gpu-roce.yaml"), "--workload", W8],
    ["scale", REF, W8, "--nodes", "1,2,4"], ["cost", REF, W8, "--tokens", "1T"], ["bom", REF],
    ["goodput", REF, W8, "--tokens", "1T"], ["collective", REF, "--op", "all_reduce", "--sweep", "1MiB:16MiB:4"],
    ["checkpoint-size", W8], ["catalog", "gpus"], ["validate"],
])
def test_every_csv_cell_of_a_numeric_column_is_a_number(args: list[str]) -> None:
    """--csv is data (issue 39): a column (or a metric) with a number in one cell has numbers in all (or
    nothing), with no thousands separators, percent signs, pairs or notes."""
    res = runner.invoke(app, ["--csv", *args])
    assert res.exit_code == 0, res.output
    for table in _csv_tables(res.stdout):
        header, *rows = table
        tidy = header[:3] == [header[0], "metric", "value"] and len(header) == 3
        groups: dict[str, list[str]] = {}
        for r in rows:
            if tidy:
                groups.setdefault(r[1], []).append(r[2])
            else:
                for h, v in zip(header, r, strict=True):
                    groups.setdefault(h, []).append(v)
        for name, values in groups.items():
            present = [v for v in values if v != ""]
            numeric = [v for v in present if _is_number(v)]
            assert not numeric or len(numeric) == len(present), (args, name, present)
            assert not any(c in v for v in numeric for c in ",%")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_a_name_with_colons_is_printed_as_written_not_as_an_emoji() -> None:
    res = runner.invoke(app, ["plan", REF, W8, "--set", "cluster.name=edge:rocket:1"])
    assert res.exit_code == 0, res.output
    assert "edge:rocket:1" in res.output
    assert "\N{ROCKET}" not in res.output
