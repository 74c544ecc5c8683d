"""FLOPs and memory checked against the published formulas (Korthikanti et al. 2022; Narayanan et al. 2021)."""

from __future__ import annotations

import pytest

from slowlink.errors import InfeasiblePlan, SpecError
from slowlink.workload.flops import hardware_flops_per_step, model_flops_per_step, params
from slowlink.workload.memory import check_fits, memory
from slowlink.workload.spec import workload_from_mapping


def _gpt(preset: str = "k22-175b", **parallel: object) -> dict[str, object]:
    return {"model": {"preset": preset}, "training": {"global_batch": 64, "recompute": "full"},
            "parallel": {"tp": 8, "pp": 8, **parallel}}


def test_model_flops_match_korthikanti_formula() -> None:
    # published_runs.yaml: 72 * B * s * l * h^2 * (1 + s/(6h) + V/(12 l h)); exact up to float rounding.
    w = workload_from_mapping(_gpt())
    b, s, nl, h, v = 64, 2048, 96, 12288, 51200
    expected = 72 * b * s * nl * h**2 * (1 + s / (6 * h) + v / (12 * nl * h))
    assert model_flops_per_step(w.model, b) == pytest.approx(expected, rel=1e-9)


def test_hardware_flops_full_recompute_match_narayanan_eq3() -> None:
    w = workload_from_mapping(_gpt())
    b, s, nl, h, v = 64, 2048, 96, 12288, 51200
    expected = 96 * b * s * nl * h**2 * (1 + s / (6 * h) + v / (16 * nl * h))
    assert hardware_flops_per_step(w.model, b, "full") == pytest.approx(expected, rel=1e-9)


def test_params_of_gpt3_and_llama3_405b() -> None:
    gpt = workload_from_mapping(_gpt("gpt3-175b"))
    assert sum(params(gpt.model)) / 1e9 == pytest.approx(175, rel=0.02)
    llama = workload_from_mapping(_gpt("llama3-405b"))
    assert sum(params(llama.model)) / 1e9 == pytest.approx(405, rel=0.02)


def test_zero_shards_optimizer_and_sp_shrinks_activations() -> None:
    base = memory(workload_from_mapping(_gpt(dp=1, zero=0)))
    z1 = memory(workload_from_mapping(_gpt(dp=8, zero=1)))
    assert z1.optimizer_bytes == pytest.approx(base.optimizer_bytes / 8)
    sel = _gpt()
    sel["training"] = {"global_batch": 64, "recompute": "selective"}
    no_sp = _gpt(sequence_parallel=False)
    no_sp["training"] = {"global_batch": 64, "recompute": "selective"}
    assert memory(workload_from_mapping(sel)).activations_bytes < memory(
        workload_from_mapping(no_sp)).activations_bytes


def test_infeasible_plan_shows_breakdown() -> None:
    w = workload_from_mapping({"model": {"preset": "gpt3-175b"}, "training": {"global_batch": 8},
                               "parallel": {"tp": 1, "pp": 1, "zero": 0}})
    with pytest.raises(InfeasiblePlan, match=r"exceeds the GPU's HBM \(80.0 GiB\): weights"):
        check_fits(memory(w), 80 * 2**30)


def test_unknown_preset_names_nearest() -> None:
    with pytest.raises(SpecError, match=r"model.preset \('llama3-8'\).*did you mean llama3-8b"):
        workload_from_mapping({"model": {"preset": "llama3-8"}, "training": {"global_batch": 8}})


def test_fp32_training_keeps_4_byte_weights_and_activations_and_no_master_copy() -> None:
    mixed = _gpt(dp=1, zero=0)
    full = _gpt(dp=1, zero=0)
    full["training"] = {"global_batch": 64, "recompute": "full", "precision": "fp32"}
    m16, m32 = memory(workload_from_mapping(mixed)), memory(workload_from_mapping(full))
    assert m32.weights_bytes == pytest.approx(2 * m16.weights_bytes)
    assert m32.grads_bytes == pytest.approx(m16.grads_bytes)
    assert m32.optimizer_bytes == pytest.approx(m16.optimizer_bytes * 8 / 12)  # m, v; no fp32 master
    assert m32.activations_bytes == pytest.approx(2 * m16.activations_bytes)


def test_autograd_accumulation_keeps_gradients_in_the_weights_dtype() -> None:
    # fp32 main_grad (4 bytes) by default; PyTorch's .grad in bf16 (2 bytes) when autograd accumulates
    fused = memory(workload_from_mapping(_gpt(dp=8, zero=1)))
    auto = _gpt(dp=8, zero=1)
    auto["training"] = {"global_batch": 64, "recompute": "full", "grad_accumulation": "autograd"}
    m = memory(workload_from_mapping(auto))
    assert m.grads_bytes == pytest.approx(fused.grads_bytes / 2)
    assert m.grads_bytes == pytest.approx(m.weights_bytes)
    assert m.optimizer_bytes == fused.optimizer_bytes
