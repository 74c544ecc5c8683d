"""The GEMM-shape efficiency model: wave quantisation, short inner dimensions, and Korthikanti Table 4."""

from __future__ import annotations

from dataclasses import replace

import pytest

from slowlink.catalog import load_catalog
from slowlink.spec.workload import Workload, workload_from_mapping
from slowlink.workload.comm import analytical_cost
from slowlink.workload.compute import K_HALF, Gemm, StageCompute, gemm_time_s, layer_compute, wave_quantisation
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


def test_selective_recompute_reruns_a_fused_attention_forward_in_backward() -> None:
    # Megatron-Core checkpoints the core attention under 'selective' whatever its kernel (core_r0.10.0
    # attention.py): with flash the backward pays one more attention forward, nothing else.
    def lc(recompute: str) -> StageCompute:
        return layer_compute(workload_from_mapping(
            {"model": {"preset": "llama3-8b"}, "parallel": {"tp": 1, "pp": 1, "dp": 1},
             "training": {"global_batch": 8, "flash_attention": True, "recompute": recompute}}), A100)

    none, selective = lc("none"), lc("selective")
    assert selective.forward_s == none.forward_s
    assert selective.backward_s - none.backward_s == pytest.approx(selective.attn_core_s)
    assert selective.attn_core_s > 0


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


# NVIDIA's published bf16 GEMM latencies (ms), m = 8192: (n, k, ms). ai-dynamo/aiconfigurator 095f58a,
# aic-core/src/aiconfigurator_core/systems/data/{a100_sxm,h100_sxm}/gemm/sglang/0.5.10/gemm_perf.parquet.
Sweep = tuple[tuple[int, int, float], ...]
SWEEP_A100: Sweep = ((4096, 128, 0.09577), (4096, 256, 0.09901), (4096, 512, 0.16482), (4096, 1024, 0.30049),
                     (4096, 2048, 0.56528), (4096, 4096, 1.13918), (4096, 8192, 2.25283), (4096, 16384, 4.39863),
                     (8192, 128, 0.18257), (8192, 256, 0.20019), (8192, 512, 0.30820), (8192, 1024, 0.56264),
                     (8192, 2048, 1.11430), (8192, 4096, 2.19373), (8192, 8192, 4.28041), (8192, 16384, 8.52500))
SWEEP_H100: Sweep = ((4096, 128, 0.03320), (4096, 256, 0.04042), (4096, 512, 0.06179), (4096, 1024, 0.09608),
                     (4096, 2048, 0.17730), (4096, 4096, 0.35355), (4096, 8192, 0.76797), (4096, 16384, 1.50727),
                     (8192, 128, 0.05954), (8192, 256, 0.06773), (8192, 512, 0.11273), (8192, 1024, 0.19717),
                     (8192, 2048, 0.36831), (8192, 4096, 0.72580), (8192, 8192, 1.59357), (8192, 16384, 2.97992))


def _fit(gpu_name: str, sweep: Sweep, k_half: float | None) -> tuple[float, float]:
    """(rms of log(model / published), best uniform rate scale) over ``sweep``: the scale absorbs the sweep's
    own clocks and harness; ``k_half`` None keeps the model's K_HALF."""
    import math

    from scipy.optimize import minimize_scalar

    gpu = replace(load_catalog([]).gpu(gpu_name), gemm_k_half=k_half)

    def rms(scale: float) -> float:
        g = replace(gpu, gemm_fraction={p: f * scale for p, f in (gpu.gemm_fraction or {}).items()})
        errs = [math.log(gemm_time_s(Gemm(8192, n, k), g, "bf16") / (ms * 1e-3)) for n, k, ms in sweep]
        return math.sqrt(sum(e * e for e in errs) / len(errs))

    best = minimize_scalar(rms, bounds=(0.5, 2.0), method="bounded")
    return float(best.fun), float(best.x)


@pytest.mark.parametrize(("gpu", "sweep"), [("a100-80gb", SWEEP_A100), ("h100-sxm", SWEEP_H100)])
def test_the_short_k_loss_follows_nvidias_published_k_sweep(gpu: str, sweep: Sweep) -> None:
    with_k, _ = _fit(gpu, sweep, None)
    assert with_k < 0.10  # K_HALF 200 in the model's form: ~9% rms on both GPUs
    assert _fit(gpu, sweep, 0.0)[0] > 2 * with_k  # without the k term: 33% (A100), 22% (H100)


def test_the_same_sweep_gives_hopper_no_larger_k_half_and_the_same_rate_share() -> None:
    """Issue 13's H100 gap is not the GEMMs': a Hopper K_HALF at the machine-balance multiple (1.8x) fits the
    H100 sweep worse, and the rate scale the sweep needs is the same on both GPUs (the catalog's MAMF-based
    gemm_fraction keeps the H100/A100 ratio this harness measures)."""
    rms_h100, scale_h100 = _fit("h100-sxm", SWEEP_H100, None)
    assert _fit("h100-sxm", SWEEP_H100, 1.8 * K_HALF)[0] > rms_h100 + 0.02
    _, scale_a100 = _fit("a100-80gb", SWEEP_A100, None)
    assert scale_h100 / scale_a100 == pytest.approx(1.0, abs=0.05)


def _llama(**training: object) -> Workload:
    return workload_from_mapping({"model": {"preset": "llama3-8b"}, "parallel": {"tp": 2, "pp": 1, "dp": 1},
                                  "training": {"global_batch": 8} | training})


@pytest.mark.parametrize("w", [
    _llama(flash_attention=False, recompute="none"), _llama(flash_attention=True, recompute="none"),
    _llama(flash_attention=False, recompute="selective"), _llama(flash_attention=True, recompute="selective"),
    _llama(flash_attention=True, recompute="full", grad_accumulation="autograd"),
    workload_from_mapping({"model": {"preset": "mixtral-8x7b"}, "parallel": {"tp": 2, "pp": 1, "dp": 8, "ep": 8},
                           "training": {"global_batch": 64, "recompute": "selective"}}),
], ids=["plain", "flash", "selective", "flash-selective", "flash-full-autograd", "mixtral"])
def test_layer_compute_is_its_parts_and_each_part_is_the_kind_it_names(w: Workload) -> None:
    from slowlink.workload.compute import LayerParts, attention_gemms, layer_gemms, layer_parts

    p, lc = layer_parts(w, A100), layer_compute(w, A100)
    parts = [getattr(p, f) for f in LayerParts.__dataclass_fields__]
    assert lc.total_s == pytest.approx(sum(parts), rel=1e-12) and min(parts) >= 0
    assert (lc.forward_s, lc.attn_core_s) == (p.forward_s, p.attn_fwd_s)
    prec, t = w.training.precision, w.training
    assert p.gemm_fwd_s == pytest.approx(sum(gemm_time_s(g, A100, prec) for g in layer_gemms(w)))
    core = sum(gemm_time_s(g, A100, prec) for g in attention_gemms(w)) * (0.5 if t.flash_attention else 1.0)
    assert p.attn_fwd_s == pytest.approx(core)
    assert p.attn_bwd_s == pytest.approx((2.5 if t.flash_attention else 2.0) * core)
    assert p.elementwise_bwd_s == pytest.approx(2 * p.elementwise_fwd_s) and p.elementwise_fwd_s > 0
    assert (p.moe_fwd_s > 0) == (w.model.moe is not None) and (p.accumulate_s > 0) == (t.grad_accumulation != "fused")
    if t.recompute == "full":
        assert p.recompute_s == pytest.approx(p.forward_s)
    elif t.recompute == "selective" and t.flash_attention:
        assert p.recompute_s == pytest.approx(p.attn_fwd_s)
    else:
        assert (p.recompute_s > p.attn_fwd_s) if t.recompute == "selective" else p.recompute_s == 0


def test_logits_compute_is_its_parts() -> None:
    from slowlink.workload.compute import logits_compute_s, logits_parts
    from slowlink.workload.loss import cross_entropy_bytes

    w = _llama(grad_accumulation="autograd")
    p = logits_parts(w, A100)
    assert logits_compute_s(w, A100) == p.gemm_s + p.cross_entropy_s + p.accumulate_s
    assert p.cross_entropy_s == pytest.approx(cross_entropy_bytes(w) / A100.hbm_bw_bytes_s)
    assert p.gemm_s > 0 and p.accumulate_s > 0
