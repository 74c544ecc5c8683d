"""bench train (a tiny model, DDP on 2 gloo ranks) and bench compute with its catalog entry."""

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from slowlink.bench.compute import parse_shapes
from slowlink.bench.train import TrainConfig, build_model, model_params
from slowlink.cli.main import app
from slowlink.errors import BenchError

pytest.importorskip("torch")
runner = CliRunner()
EXAMPLES = Path(__file__).parents[2] / "examples"
TINY = ["--layers", "1", "--hidden", "32", "--heads", "2", "--ffn-hidden", "64", "--vocab", "64", "--seq-len", "16",
        "--batch", "2", "--steps", "2", "--warmup-steps", "1"]


def test_param_count_matches_the_model() -> None:
    cfg = TrainConfig(layers=2, hidden=32, heads=4, ffn_hidden=48, vocab=100, seq_len=8)
    n, e = model_params(cfg)
    assert n + e == sum(p.numel() for p in build_model(cfg).parameters())


def test_bad_shapes_and_heads() -> None:
    with pytest.raises(BenchError, match=r"--shapes \('4x4'\)"):
        parse_shapes("4x4")
    with pytest.raises(BenchError, match=r"--hidden \(30\) must be divisible by --heads \(4\)"):
        TrainConfig(hidden=30, heads=4).check()


def test_compute_writes_a_catalog_entry_the_cluster_accepts(tmp_path: Path) -> None:
    cat = tmp_path / "cat.yaml"
    res = runner.invoke(app, ["bench", "compute", "--shapes", "64", "--threads", "1", "--catalog-out", str(cat),
                              "--name", "cpu-test", "--json", "--results", str(tmp_path)])
    assert res.exit_code == 0, res.output
    entry = yaml.safe_load(cat.read_text())["gpus"]["cpu-test"]
    assert entry["bf16_tflops"] == pytest.approx(json.loads(res.stdout)["summary"]["peak_tflops"]["bf16"])
    cluster = yaml.safe_load((EXAMPLES / "bench-localhost.yaml").read_text())
    cluster.update(gpu="cpu-test", catalog=["cat.yaml"])
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cluster))
    from slowlink.spec.cluster import load_cluster

    assert load_cluster(tmp_path / "c.yaml").gpu.peak("bf16") == pytest.approx(entry["bf16_tflops"] * 1e12)


@pytest.mark.slow
def test_train_reports_ratio_mfu_and_plan(tmp_path: Path) -> None:
    for name in ("bench-localhost.yaml", "bench-cpu-catalog.yaml"):
        (tmp_path / name).write_text((EXAMPLES / name).read_text())
    cluster = str(tmp_path / "bench-localhost.yaml")
    res = runner.invoke(app, ["bench", "train", "--nproc", "2", *TINY, "--cluster", cluster, "--json",
                              "--results", str(tmp_path)])
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.stdout)
    assert row["ranks"] == 2 and row["compute_s"] > 0 and row["comm_s"] > 0
    assert row["comm_compute_ratio"] == pytest.approx(row["exposed_comm_s"] / row["compute_s"])
    assert row["mfu"] > 0 and row["plan"]["step_time_s"] > 0
