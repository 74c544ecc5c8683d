"""bench train (a tiny model, DDP on 2 gloo ranks) and bench compute with its catalog entry."""

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from slowlink.bench.compute import fit_k_half, gemm_rows, parse_shapes
from slowlink.bench.train import TrainConfig, build_model, fastest_precision, model_params
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
    summary = json.loads(res.stdout)["summary"]
    assert entry["bf16_tflops"] == pytest.approx(summary["peak_tflops"]["bf16"], rel=1e-5)  # JSON: 6 digits
    assert entry["sms"] == 1 and entry["gemm_fraction"] == 1.0  # one thread; the peak is an achieved rate
    assert entry["gemm_k_half"] == pytest.approx(summary["gemm_k_half"], abs=0.05) and entry["gemm_k_half"] >= 0
    assert entry["elementwise_gbyte_s"] == pytest.approx(summary["elementwise_gbyte_s"], rel=1e-5)
    assert entry["elementwise_gbyte_s"] > 0 and entry["adam_ns_per_param"] > 0
    cluster = yaml.safe_load((EXAMPLES / "bench-localhost.yaml").read_text())
    cluster.update(gpu="cpu-test", catalog=["cat.yaml"])
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cluster))
    from slowlink.spec.cluster import load_cluster

    assert load_cluster(tmp_path / "c.yaml").gpu.peak("bf16") == pytest.approx(entry["bf16_tflops"] * 1e12)


def test_k_half_fit_recovers_the_inner_dimension_of_half_rate() -> None:
    rate, k_half = 6.0, 96.0  # the sweep shape's own rate (its wave loss included) does not matter
    rows = [{"k": k, "tflops": rate * k / (k + k_half)} for k in (64, 128, 256, 512, 1024, 2048)]
    assert fit_k_half(rows) == pytest.approx(k_half)
    assert fit_k_half([{"k": k, "tflops": rate} for k in (64, 2048)]) == pytest.approx(0.0, abs=1e-9)  # flat
    rising = [{"k": k, "tflops": rate * (1 - k / 4096)} for k in (64, 2048)]  # faster at short k: no loss
    assert fit_k_half(rising) == 0.0


def test_a_shape_projected_past_the_call_limit_is_skipped_with_a_note() -> None:
    rows, notes = gemm_rows(((256, 256, 256), (64, 64, 64)), ("fp32",), "cpu", warmup=0, min_time_s=0.0,
                            max_iters=1, max_call_s=1e-12)
    assert [(r["m"], r["dtype"]) for r in rows] == [(64, "fp32")]  # smallest first; the next is projected
    assert len(notes) == 1 and notes[0].startswith("fp32 256x256x256 skipped: one call would take")


def test_auto_precision_is_a_measured_choice_on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    assert fastest_precision("cpu", n=64) in ("bf16", "fp32")
    import slowlink.bench.compute as compute

    for fast in ("bf16", "fp32"):  # whichever GEMM measured faster is chosen
        rates = {"bf16": 1.0, "fp32": 0.5} if fast == "bf16" else {"bf16": 0.001, "fp32": 0.07}
        monkeypatch.setattr(compute, "gemm_rows", lambda *_a, rates=rates, **_k: (
            [{"dtype": d, "tflops": r} for d, r in rates.items()], []))
        assert fastest_precision("cpu") == fast
    assert fastest_precision("cuda:0") == "bf16"
    with pytest.raises(BenchError, match=r"--precision \('fp64'\) must be one of auto, bf16, fp16, fp32"):
        TrainConfig(precision="fp64").check()


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
    assert row["comm_compute_ratio"] == pytest.approx(row["exposed_comm_s"] / row["compute_s"], rel=1e-5)  # 6 digits
    assert row["mfu"] > 0 and row["plan"]["step_time_s"] > 0
    assert row["precision"] in ("bf16", "fp32")  # auto: whichever GEMM is faster on this CPU


@pytest.mark.slow
def test_train_in_fp32_is_planned_in_fp32(tmp_path: Path) -> None:
    for name in ("bench-localhost.yaml", "bench-cpu-catalog.yaml"):
        (tmp_path / name).write_text((EXAMPLES / name).read_text())
    res = runner.invoke(app, ["bench", "train", "--nproc", "1", *TINY, "--precision", "fp32", "--cluster",
                              str(tmp_path / "bench-localhost.yaml"), "--json", "--no-results"])
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.stdout)
    assert row["precision"] == "fp32"
    from slowlink.bench.train_plan import plan_for

    cfg = TrainConfig(layers=1, hidden=32, heads=2, ffn_hidden=64, vocab=64, seq_len=16, batch=2)
    assert row["plan"]["step_time_s"] == pytest.approx(
        plan_for(cfg, 1, "fp32", tmp_path / "bench-localhost.yaml").step_time_s)
