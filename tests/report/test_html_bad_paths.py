"""A bad ``--html`` path on the commands added after plan/scale/collective/simulate (test_html.py has those):
exit 2, the flag and the rule named, no traceback, and nothing done or written."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from slowlink.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "examples"
runner = CliRunner()


@pytest.mark.parametrize(("target", "message"), [
    ("missing/page.html", "folder"),
    ("page.txt", "must end in .html or .htm"),
    ("page", "must end in .html or .htm"),
])
@pytest.mark.parametrize("command", [
    ["search", str(ROOT / "tests" / "data" / "html-search-tiny.yaml"), "--workers", "0"],
    ["cost", str(EX / "ref-64gpu.yaml"), str(EX / "llama3-8b.yaml")],
    ["bom", str(EX / "cost-superpod-1su.yaml")],
    ["share", str(EX / "share-deadlock.yaml")],
])
def test_bad_output_path_is_exit_2_before_any_work(tmp_path: Path, command: list[str], target: str,
                                                   message: str) -> None:
    res = runner.invoke(app, [*command, "--html", str(tmp_path / target)])
    assert res.exit_code == 2, res.output
    assert "--html" in res.output and message in res.output and "Traceback" not in res.output
    assert res.stdout.strip() == "" or "error" in res.stdout  # no table: the check ran before the work
    assert list(tmp_path.iterdir()) == []
