"""The GEMM-shape efficiency model: wave quantisation, short inner dimensions, and Korthikanti Table 4."""

from __future__ import annotations

import pytest

from slowlink.catalog import load_catalog
from slowlink.workload.comm import analytical_cost
from slowlink.workload.compute import Gemm, gemm_time_s, layer_compute, wave_quantisation
from slowlink.workload.spec import workload_from_mapping
from slowlink.workload.traffic import tp_layer
from slowlink.workload.validate import selene

A100 = load_catalog([]).gpu("a100-80gb")


def test_one_tile_past_a_full_wave_halves_the_wave_efficiency() -> None:
    full = Gemm(128 * 108, 128, 4096)  # exactly one wave of 128x128 tiles on 108 SMs
    spill = Gemm(128 * 109, 128, 4096)  # one tile more: a second, nearly empty wave
    assert wave_quantisation(full, A100.sms) == pytest.approx(1.0)
    assert wave_quantisation(spill, A100.sms) == pytest.approx(109 / 216)


def test_short_inner_dimension_and_low_intensity_cost_more_per_flop() -> None:
    big = Gemm(8192, 8192, 8192)
    short_k = Gemm(8192, 8192, 64)
    rate = big.flops / gemm_time_s(big, A100, "fp16")
    assert short_k.flops / gemm_time_s(short_k, A100, "fp16") < 0.6 * rate
    assert rate < A100.sustained("fp16")


def test_a_measured_k_half_replaces_the_gpu_constant() -> None:
    from dataclasses import replace

    from slowlink.workload.compute import K_HALF

    g = Gemm(8192, 8192, 256)
    flat = replace(A100, gemm_k_half=0.0)  # a device whose GEMMs do not lose rate on short k
    assert gemm_time_s(g, A100, "fp16") / gemm_time_s(g, flat, "fp16") == pytest.approx((256 + K_HALF) / 256)


def test_a_measured_elementwise_rate_prices_the_elementwise_kernels_only() -> None:
    from dataclasses import replace

    w = workload_from_mapping({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 8},
                               "parallel": {"tp": 1, "pp": 1, "dp": 1}})
    base = layer_compute(w, A100)
    same = layer_compute(w, replace(A100, elementwise_bw=A100.hbm_bw_bytes_s))
    slow = layer_compute(w, replace(A100, elementwise_bw=A100.hbm_bw_bytes_s / 10))
    assert same == base  # null = the HBM bandwidth
    assert slow.forward_s > base.forward_s and slow.attn_core_s == base.attn_core_s


@pytest.mark.parametrize(("recompute", "sp", "fwd_ms", "bwd_ms"), [
    # Korthikanti et al. 2022, Table 4: one layer of the 22B model, TP 8, micro-batch 4 (published_runs.yaml).
    ("none", False, 7.7, 11.9),
    ("full", False, 7.7, 19.5),
    ("selective", True, 7.2, 13.1),
])
def test_layer_time_matches_korthikanti_table4(recompute: str, sp: bool, fwd_ms: float, bwd_ms: float) -> None:
    w = workload_from_mapping({"model": {"preset": "k22-22b"},
                               "training": {"global_batch": 4, "micro_batch": 4, "precision": "fp16",
                                            "recompute": recompute, "flash_attention": False},
                               "parallel": {"tp": 8, "sequence_parallel": sp}})
    lc = layer_compute(w, A100)
    tp = tp_layer(w, analytical_cost(selene(1))).total_s
    passes = 3.0 if recompute == "full" else 2.0
    fwd = lc.forward_s + tp / passes
    bwd = lc.backward_s + tp * (passes - 1) / passes
    assert fwd * 1e3 == pytest.approx(fwd_ms, rel=0.15)
    assert bwd * 1e3 == pytest.approx(bwd_ms, rel=0.15)
