"""``slowlink share --html``: the policies compared, the timeline, the deadlock named, the numbers of the result
on the page (well-formedness fixture in conftest.py)."""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from slowlink.cli.main import app
from slowlink.share.scenario import load_share
from slowlink.share.sim import simulate_share

pytest.importorskip("matplotlib")
EX = Path(__file__).resolve().parents[2] / "examples"
DEADLOCK = EX / "share-deadlock.yaml"
runner = CliRunner()


def test_share_page_compares_policies_and_names_the_deadlock(tmp_path: Path, parse_page: Callable[..., Any]) -> None:
    out = tmp_path / "share.html"
    res = runner.invoke(app, ["share", str(DEADLOCK), "--json", "--html", str(out)])
    assert res.exit_code == 0, res.output
    assert set(json.loads(res.stdout)["policies"]) == {"per-gpu/whole", "gang/whole"}
    assert parse_page(out).figures == {"policies": 1, "timeline": 1}
    text = out.read_text()
    result = simulate_share(*load_share(DEADLOCK))
    for p in result.policies:  # each policy's numbers, in the table and on the bars
        assert f"<td>{p.utilisation:.1%}</td><td>{p.allocated:.1%}</td><td>{p.fragmentation:.1%}</td>" in text
        assert f"<td>{p.finished}/{p.jobs}</td>" in text
        assert f" {100 * p.utilisation:.0f}%" in text.split('id="policies"')[1].split("</figure>")[0]
    d = result.policies[0].deadlocks[0]
    assert html.escape(d.describe()) in text and "deadlock under per-gpu/whole at t=80.0 s" in text
    assert "highest utilisation: gang/whole, 75.0%" in text
    assert "shortest mean queue without a deadlock: gang/whole, 71.0 s" in text  # not the deadlocked 0 s
    assert "waiting jobs" in text and "per-gpu/whole allocated" in text  # the timeline's axis and legend
    assert "1 x 8 h100-sxm = 8 GPUs" in text and "10: 8 data-processing, 2 training" in text  # the inputs
    row = ("gang/whole", "training", "2/2", "1.00x", "1.59x")  # a slowdown row: JCT with the 355 s wait
    assert "<td class=\"w\">{}</td><td class=\"w\">{}</td><td>{}</td><td>{}</td><td>{}</td>".format(*row) in text
