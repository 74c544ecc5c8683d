"""`bench train --profile-dir` writes real torch.profiler traces of the distributed steps (gloo here), and
`read kineto` reads them: the loop from a run on this machine to its measured compute/communication split."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slowlink.cli.main import app

pytest.importorskip("torch")
runner = CliRunner()
TINY = ["--layers", "1", "--hidden", "32", "--heads", "2", "--ffn-hidden", "64", "--vocab", "64", "--seq-len", "16",
        "--batch", "2", "--steps", "2", "--warmup-steps", "1", "--precision", "fp32", "--threads", "1"]


def test_bench_train_writes_traces_read_kineto_reads(tmp_path: Path) -> None:
    res = runner.invoke(app, ["bench", "train", "--nproc", "2", *TINY, "--profile-dir", str(tmp_path),
                              "--no-results", "--json"])
    assert res.exit_code == 0, res.output
    traces = sorted((tmp_path / "ddp-2ranks").iterdir())
    assert [p.name for p in traces] == ["rank-0.json.gz", "rank-1.json.gz"]
    res = runner.invoke(app, ["read", "kineto", str(tmp_path / "ddp-2ranks"), "--json"])
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    assert [r["rank"] for r in got["ranks"]] == [0, 1] and got["backend"] == "gloo"
    for r in got["ranks"]:
        assert r["steps"] == 2 and r["step_mean_s"] > 0 and r["communication_s"] > 0 and r["compute_s"] > 0
        assert {"rank", "steps", "step_mean_s", "kernel_s", "compute_s", "communication_s", "memory_s", "idle_s",
                "comm_comp_overlap"} <= set(r)
    (ar,) = [c for c in got["collectives"] if c["op"] == "all_reduce"]
    # DDP's one gradient bucket: every parameter, fp32 (the model's 1 x 32 block, embedding and output layer)
    assert ar["size_bytes"] % 4 == 0 and ar["calls"] == 4 and ar["group_size"] == 2
