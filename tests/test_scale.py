"""scale: every node count assessed by the chain; a size that cannot run is a row of its own with its reason and
the others go on (issue 39); when none can run, one refusal lists them all."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from typer.testing import CliRunner

from slowlink.cli.main import app
from slowlink.scale import scale
from slowlink.spec.cluster import load_cluster
from slowlink.spec.workload import load_workload

EX = Path(__file__).resolve().parents[1] / "examples"
REF, W70 = str(EX / "ref-64gpu.yaml"), str(EX / "llama3-70b.yaml")  # llama3-70b: tp 8 x pp 4 = 32 GPUs a replica


def test_sizes_that_cannot_run_are_refused_and_the_rest_go_on() -> None:
    s = scale(load_workload(W70), load_cluster(REF), [1, 4, 8])
    assert [p.nodes for p in s.points] == [4, 8] and s.points[0].efficiency == 1.0  # against the smallest that runs
    assert [(r.nodes, r.gpus, r.rule) for r in s.refused] == [(1, 8, "gpus_divide")]
    assert "its 8 GPUs are not divisible by tp*pp*cp (32)" in s.refused[0].why


def test_the_command_shows_the_refused_row_json_and_text() -> None:
    res = CliRunner().invoke(app, ["scale", REF, W70, "--nodes", "1,4,8", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert [p["nodes"] for p in d["points"]] == [4, 8]
    assert d["infeasible"] == [{"nodes": 1, "gpus": 8, "infeasible": "its 8 GPUs are not divisible by tp*pp*cp (32)",
                                "rule": "gpus_divide"}]
    res = CliRunner().invoke(app, ["scale", REF, W70, "--nodes", "1,4,8"])
    assert res.exit_code == 0 and "infeasible" in res.stdout and "1 node: infeasible: its 8 GPUs" in res.stdout


def test_no_size_that_runs_is_one_refusal(cli_fails: Callable[..., str]) -> None:
    cli_fails(["scale", REF, W70, "--nodes", "1,2"], "no node count can run this workload",
              "1 node: its 8 GPUs", "2 nodes: its 16 GPUs")


def test_across_sites_the_dp_column_holds_the_sync_over_the_long_haul() -> None:
    """The exposed cross-site seconds are DP's (the gradient sync crossing sites): scale's "DP exp s" column counts
    them, so that the columns add up to the step the tokens/s came from."""
    from slowlink.report.plan import scale_table

    s = scale(load_workload(EX / "llama3-8b.yaml"), load_cluster(EX / "two-site-1000km.yaml"), [8])
    (p,) = s.points
    cross = p.assessment.cross_site
    assert cross is not None and cross.exposed_s > 0
    dp_cells = list(next(c for c in scale_table(s, "global-batch").columns if c.header == "DP exp s").cells)
    assert float(dp_cells[0]) == round(p.result.comm_s["dp"] + cross.exposed_s, 3)
