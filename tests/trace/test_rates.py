"""A traced op's rate on another GPU: XLA's sm_90 GEMM table and FlashAttention-2's A100/H100 tables where they
cover the GPU (exact at a tabled shape), the step model's shape dependence between shapes and on other GPUs; and
the per-class prediction built on them."""

from __future__ import annotations

import pytest

from slowlink.catalog import load_catalog
from slowlink.trace.predict import attention_shape, gemm_of, precision_of, predict
from slowlink.trace.rates import attention_rate, gemm_rate
from slowlink.trace.result import OpShape, TraceRank
from slowlink.workload.compute import Gemm, gemm_time_s

CAT = load_catalog()
A100, H100, H200 = CAT.gpu("a100-80gb"), CAT.gpu("h100-sxm"), CAT.gpu("h200")


def test_a_tabled_gemm_shape_is_the_tables_rate() -> None:
    # XLA sm_90 table (matmul_interpolator_data.h): b 1, 4096^3, bf16 783.3 TFLOP/s; 4096 x 4096 x 256: 392.2
    for gpu in (H100, H200):  # the same dense bf16 peak
        assert gemm_rate(Gemm(4096, 4096, 4096), gpu, "bf16").flops_s == pytest.approx(783.3e12)
        assert gemm_rate(Gemm(4096, 4096, 256), gpu, "bf16").flops_s == pytest.approx(392.2e12)
    assert "xla_sm90" in gemm_rate(Gemm(4096, 4096, 4096), H100, "fp16").source


def test_between_tabled_shapes_the_model_carries_the_nearest() -> None:
    big, anchor = Gemm(8192, 8192, 8192), Gemm(4096, 4096, 4096)
    model = (big.flops / gemm_time_s(big, H100, "bf16")) / (anchor.flops / gemm_time_s(anchor, H100, "bf16"))
    assert gemm_rate(big, H100, "bf16").flops_s == pytest.approx(783.3e12 * model)


def test_a_gpu_no_table_covers_is_the_step_model() -> None:
    g = Gemm(4096, 4096, 4096)
    r = gemm_rate(g, A100, "bf16")
    assert r.flops_s == pytest.approx(g.flops / gemm_time_s(g, A100, "bf16")) and "step model" in r.source
    assert "xla" not in gemm_rate(g, H100, "fp32").source  # the table is bf16 x bf16 only


def test_attention_rates_from_flash_attention_2() -> None:
    # FA2 fwd+bwd, no causal mask, head dim 128, seqlen 8k: A100 80GB 201, H100 SXM5 335 TFLOP/s
    assert attention_rate(8192, 128, A100, "bf16").flops_s == pytest.approx(201e12)  # type: ignore[union-attr]
    assert attention_rate(8000, 128, H100, "bf16").flops_s == pytest.approx(335e12)  # type: ignore[union-attr]
    assert attention_rate(1024, 128, A100, "bf16").flops_s == pytest.approx(187e12)  # nearest bar drawn: 2k
    assert attention_rate(8192, 96, A100, "bf16") is None and attention_rate(8192, 128, CAT.gpu("mi300x"),
                                                                             "bf16") is None


@pytest.mark.parametrize(("op", "dims", "gemm"), [
    ("aten::mm", [[64, 256], [256, 1024]], Gemm(64, 1024, 256)),
    ("aten::addmm", [[1024], [64, 256], [256, 1024], [], []], Gemm(64, 1024, 256)),
    ("aten::bmm", [[8, 32, 16], [8, 16, 64]], Gemm(32, 64, 16, 8)),
    ("aten::baddbmm", [[8, 32, 64], [8, 32, 16], [8, 16, 64], [], []], Gemm(32, 64, 16, 8)),
    ("aten::linear", [[2, 32, 64], [256, 64], [256]], Gemm(64, 256, 64)),
    ("aten::matmul", [[2, 4, 32, 16], [2, 4, 16, 32]], Gemm(32, 32, 16, 8)),
    ("aten::add", [[2, 3], [2, 3]], None),
    ("aten::mm", [[2, 3], []], None),
])
def test_gemm_shapes_from_input_dims(op: str, dims: list[object], gemm: Gemm | None) -> None:
    assert gemm_of(op, dims) == gemm


def test_attention_shape_and_precision_of_a_traced_type() -> None:
    assert attention_shape("aten::_scaled_dot_product_flash_attention", [[2, 16, 4096, 128], [2, 16, 4096, 128]]) \
        == (2, 16, 4096, 128)
    assert attention_shape("aten::mm", [[2, 3], [3, 4]]) is None
    assert attention_shape("ScaledDotProductFlashAttentionForCpuBackward0", [[2, 2, 32, 32]]) == (2, 2, 32, 32)
    assert [precision_of(t, "bf16") for t in ("float", "c10::BFloat16", "c10::Half", None, "TensorList")] == \
        ["fp32", "bf16", "fp16", "bf16", "bf16"]


def _rank(shapes: tuple[OpShape, ...], classes: dict[str, float]) -> TraceRank:
    return TraceRank(0, "f", "cuda", 3, 0.1, 0.1, 2, 0.2, 0.1, 0.0, 0.0, 0.0, 0.0, {}, classes, shapes)


def test_an_a100_step_on_an_h100_class_by_class() -> None:
    gemm = OpShape("gemm", "aten::mm", [[4096, 4096], [4096, 4096]], "c10::BFloat16", 10, 0.010)
    attn = OpShape("attention", "aten::_scaled_dot_product_flash_attention", [[2, 16, 8192, 128]] * 3,
                   "c10::BFloat16", 2, 0.020)
    rank = _rank((gemm, attn), {"gemm": 0.012, "attention": 0.020, "elementwise": 0.004, "optimizer": 0.002,
                                "other": 0.001})
    by = {c.cls: c for c in predict(rank, A100, H100, "bf16").classes}
    g = Gemm(4096, 4096, 4096)
    shaped = 0.010 * (g.flops / gemm_time_s(g, A100, "bf16")) / 783.3e12
    unshaped = 0.002 * A100.sustained("bf16") / H100.sustained("bf16")
    assert by["gemm"].measured_s == pytest.approx(0.006)  # per step: 2 analysed steps
    assert by["gemm"].predicted_s == pytest.approx((shaped + unshaped) / 2)
    assert by["attention"].predicted_s == pytest.approx(0.010 * 201 / 335)
    assert by["elementwise"].ratio == pytest.approx(2039 / 3350)
    assert by["optimizer"].ratio == pytest.approx(2039 / 3350) and by["other"].ratio == 1.0
