"""workload.fp8: which GEMMs run in FP8, what each recipe's quantization moves (Transformer Engine's docs, quoted in
shared/calibration/kernels.yaml te_fp8_*), the FP8 GEMM rate against tilelang's published K sweep, and the recipe's
checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from slowlink.catalog import load_catalog
from slowlink.errors import InfeasiblePlan, SpecError
from slowlink.spec.cluster import load_cluster
from slowlink.spec.workload import Workload, workload_from_mapping
from slowlink.workload.compute import (
    FP8_K_HALF_RATIO,
    attention_gemms,
    gemm_time_s,
    layer_parts,
    linear_gemms,
    logits_parts,
    output_gemm,
)
from slowlink.workload.fp8 import amax_allreduces, quantize_bytes, quantize_bytes_per_element
from slowlink.workload.step import plan

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = load_cluster(ROOT / "examples" / "ref-64gpu.yaml")  # 64 H100 SXM
H100 = load_catalog().gpu("h100-sxm")


def _w(precision: str = "fp8", recipe: str | None = None, tp: int = 4, recompute: str = "selective") -> Workload:
    training: dict[str, object] = {"global_batch": 64, "micro_batch": 1, "precision": precision,
                                   "recompute": recompute}
    if recipe is not None:
        training["fp8_recipe"] = recipe
    return workload_from_mapping({"model": {"preset": "llama3-70b"}, "training": training,
                                  "parallel": {"tp": tp, "pp": 1, "dp": 64 // tp}}, "w.yaml")


def test_bytes_per_element_follow_the_te_recipes() -> None:
    # bf16 source (2 B), two FP8 copies written (rowwise, columnwise: 2 x 1 B)
    assert quantize_bytes_per_element("delayed", "activation") == 2 + 2  # one read: "from two to one"
    assert quantize_bytes_per_element("current", "activation") == 4 + 2  # "reading the tensor twice"
    assert quantize_bytes_per_element("blockwise", "activation") == 4 + 2  # 1D: each copy from the source
    assert quantize_bytes_per_element("blockwise", "weight") == 2 + 2 + 1  # 2D: one read, transposed in FP8
    assert quantize_bytes_per_element("mxfp8", "weight") == 4 + 2


def test_a_linear_quantizes_input_and_weight_forward_and_its_gradient_backward() -> None:
    w = _w(recipe="current")
    fwd, bwd = quantize_bytes(w, 4096.0, 8192.0, 1024.0)
    assert fwd == 4096 * 1024 * 6 + 8192 * 1024 * 6
    assert bwd == 4096 * 8192 * 6


def test_only_the_linear_gemms_run_in_fp8() -> None:
    fp8, bf16 = layer_parts(_w(), H100), layer_parts(_w("bf16"), H100)
    assert fp8.attn_fwd_s == bf16.attn_fwd_s  # the attention core stays BF16 (fp8_dpa off)
    lin = linear_gemms(_w())
    assert fp8.gemm_fwd_s == pytest.approx(sum(gemm_time_s(g, H100, "fp8") for g in lin))
    assert fp8.gemm_fwd_s < 0.7 * bf16.gemm_fwd_s
    assert logits_parts(_w(), H100).gemm_forward_s == gemm_time_s(output_gemm(_w()), H100, "bf16")
    bw = H100.hbm_bw_bytes_s
    q = [quantize_bytes(_w(), g.m, g.n, g.k) for g in lin]
    assert fp8.quantize_fwd_s == pytest.approx(sum(f for f, _ in q) / bw)
    assert fp8.quantize_bwd_s == pytest.approx(sum(b for _, b in q) / bw)
    assert bf16.quantize_fwd_s == bf16.quantize_bwd_s == 0.0
    assert len(attention_gemms(_w())) == 2


def test_the_fp8_rate_is_tilelangs_k_sweep() -> None:
    # tilelang benchmark/matmul_fp8 on H800 SXM (same SM90 compute as the H100 SXM), M = N = 8192: TFLOP/s by K;
    # the catalog's fraction x peak and FP8's k_half (the FP16 sweep's 258.5 x FP8_K_HALF_RATIO) give it within 4%
    # (the fit's largest residual, at K 256)
    sweep = {256: 569, 512: 858, 1024: 1129, 2048: 1343, 4096: 1467, 8192: 1507, 16384: 1541}
    rate = H100.sustained("fp8") / 1e12
    assert rate == pytest.approx(1603, rel=0.005)
    for k, tflops in sweep.items():
        assert rate * k / (k + 258.5 * FP8_K_HALF_RATIO) == pytest.approx(tflops, rel=0.04)


def test_current_scaling_reduces_the_amax_of_gathered_tensors() -> None:
    assert amax_allreduces(_w(recipe="current")) == (2.0, 2.0)
    assert amax_allreduces(_w(recipe="current", recompute="full")) == (4.0, 2.0)
    assert amax_allreduces(_w(recipe="delayed")) == (0.0, 0.0)
    assert amax_allreduces(_w(recipe="current", tp=1)) == (0.0, 0.0)
    current, delayed = plan(_w(recipe="current"), CLUSTER, check_memory=False), plan(_w(), CLUSTER, check_memory=False)
    layers, micro = 80, 64 // 16
    assert current.collectives_per_step["tp"] - delayed.collectives_per_step["tp"] == micro * layers * 4
    assert current.step_time_s > delayed.step_time_s  # two reads per quantization and the amax all-reduces


def test_fp8_is_faster_than_bf16_but_by_less_than_the_gemms() -> None:
    fp8, bf16 = plan(_w(), CLUSTER, check_memory=False), plan(_w("bf16"), CLUSTER, check_memory=False)
    assert fp8.step_time_s < bf16.step_time_s
    assert fp8.compute_s > 0.5 * bf16.compute_s


def test_recipe_checks() -> None:
    with pytest.raises(SpecError, match=r"training: fp8_recipe \(current\) is for precision fp8, not bf16"):
        _w("bf16", recipe="current")
    with pytest.raises(InfeasiblePlan, match=r"training.fp8_recipe \('mxfp8'\) needs blackwell tensor cores; gpu "
                       r"h100-sxm of cluster .* is hopper") as exc:
        plan(_w(recipe="mxfp8"), CLUSTER, check_memory=False)
    assert exc.value.rule == "precision_supported"
