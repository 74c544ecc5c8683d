"""Issue 19: ``slowlink init`` writes commented files that load and plan."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from slowlink.cli.main import app
from slowlink.spec.cluster import load_cluster
from slowlink.spec.workload import load_workload
from slowlink.workload.step import plan

runner = CliRunner()


def test_the_default_files_load_plan_and_are_commented(tmp_path: Path) -> None:
    res = runner.invoke(app, ["init", str(tmp_path)])
    assert res.exit_code == 0, res.output
    c, w = tmp_path / "cluster.yaml", tmp_path / "workload.yaml"
    assert "# " in c.read_text() and "# " in w.read_text()
    result = plan(load_workload(w), load_cluster(c))
    assert f"step {result.step_time_s:.3f} s" in res.output


def test_the_layout_is_the_smallest_that_fits(tmp_path: Path) -> None:
    res = runner.invoke(app, ["init", str(tmp_path), "--model", "llama3-70b"])
    assert res.exit_code == 0, res.output
    w = load_workload(tmp_path / "workload.yaml")
    assert w.parallel.tp * w.parallel.pp > 1  # 70B does not fit one H100 per replica
    assert "note:" not in res.output


def test_given_options_are_written(tmp_path: Path) -> None:
    res = runner.invoke(app, ["init", str(tmp_path), "--gpu", "a100-80gb", "--nodes", "4", "--transport", "roce",
                              "--nic-gbit", "200", "--nics", "4", "--tp", "8", "--pp", "1"])
    assert res.exit_code == 0, res.output
    c = load_cluster(tmp_path / "cluster.yaml")
    assert (c.gpus, c.gpu.name, c.scale_up.link.name) == (32, "a100-80gb", "nvlink3")
    assert load_workload(tmp_path / "workload.yaml").parallel.dp == 4


def test_existing_files_are_kept_without_force(tmp_path: Path) -> None:
    (tmp_path / "cluster.yaml").write_text("mine")
    res = runner.invoke(app, ["init", str(tmp_path)])
    assert res.exit_code == 2 and "--force" in res.output
    assert (tmp_path / "cluster.yaml").read_text() == "mine"
    assert not (tmp_path / "workload.yaml").exists()


@pytest.mark.parametrize(("args", "needle"), [
    (["--gpu", "h100"], "--gpu ('h100') is not in the catalog"),
    (["--nodes", "0"], "--nodes (0) must be >= 1"),
    (["--tp", "3"], "--tp (3) * --pp (auto) must divide the GPUs"),
    (["--transport", "myrinet"], "fabric.transport"),
    (["--model", "gpt5"], "gpt5"),
])
def test_bad_options_write_nothing(tmp_path: Path, args: list[str], needle: str) -> None:
    res = runner.invoke(app, ["init", str(tmp_path), *args])
    assert res.exit_code == 2, res.output
    assert needle in res.output and "Traceback" not in res.output
    assert list(tmp_path.iterdir()) == []


def test_a_missing_folder_is_created_and_a_file_refused(tmp_path: Path) -> None:
    """init DIR needed DIR to exist (issue 39): it is created, with its parents, once every check has passed."""
    res = runner.invoke(app, ["init", str(tmp_path / "new" / "lab")])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in (tmp_path / "new" / "lab").iterdir()) == ["cluster.yaml", "workload.yaml"]
    (tmp_path / "afile").write_text("x")
    res = runner.invoke(app, ["init", str(tmp_path / "afile")])
    assert res.exit_code == 2 and "is a file" in res.output and "Traceback" not in res.output
    res = runner.invoke(app, ["init", str(tmp_path / "never"), "--nodes", "0"])
    assert res.exit_code == 2 and not (tmp_path / "never").exists()  # refused before anything is created
