"""``slowlink simulate``: table, JSON schema, heatmap, clean exit 2 on bad input."""

from __future__ import annotations

import builtins
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from slowlink.cli.main import app

SCEN = "examples/scenario-ckpt-converged.yaml"


def test_json_has_traffic_breakdown_hottest_links_and_per_link_utilisation() -> None:
    res = CliRunner().invoke(app, ["simulate", SCEN, "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    names = [t["name"] for t in data["traffic"]]
    assert names == ["grad-allreduce", "checkpoint"]
    ring = data["traffic"][0]
    assert ring["slowdown"] > 1.2 and ring["contention_s"] > 0
    assert data["hottest_links"][0]["mean_utilisation"] <= 1 + 1e-9
    assert all(0 <= v["peak_utilisation"] <= 1 + 1e-9 for v in data["links"].values())


def test_table_output() -> None:
    res = CliRunner().invoke(app, ["simulate", SCEN])
    assert res.exit_code == 0, res.output
    assert "grad-allreduce" in res.stdout and "hottest links" in res.stdout


def test_heatmap_written(tmp_path: Path) -> None:
    out = tmp_path / "h.png"
    res = CliRunner().invoke(app, ["simulate", "examples/scenario-two-jobs.yaml", "--heatmap", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_heatmap_without_matplotlib_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = builtins.__import__

    def fake(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake)
    res = CliRunner().invoke(app, ["simulate", SCEN, "--heatmap", str(tmp_path / "h.png")])
    assert res.exit_code == 2
    assert "'plot' extra" in res.output and "Traceback" not in res.output


def test_bad_scenario_exits_2_naming_the_field(tmp_path: Path) -> None:
    p = tmp_path / "s.yaml"
    p.write_text("cluster: nowhere.yaml\ntraffic:\n  - {name: a, kind: collective, op: all_reduce}\n")
    res = CliRunner().invoke(app, ["simulate", str(p)])
    assert res.exit_code == 2
    assert "does not exist" in res.output and "Traceback" not in res.output
