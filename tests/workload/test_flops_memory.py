"""FLOPs and memory checked against the published formulas (Korthikanti et al. 2022; Narayanan et al. 2021)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from slowlink.errors import InfeasiblePlan, SpecError
from slowlink.spec.workload import workload_from_mapping
from slowlink.workload.flops import hardware_flops_per_step, model_flops_per_step, params
from slowlink.workload.memory import activation_bytes_per_layer, check_fits, logits_bytes, memory, stage_params


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
    with pytest.raises(InfeasiblePlan, match=r"exceeds the GPU's HBM \(80.0 GiB\) by [0-9,]+ MiB: weights"):
        check_fits(memory(w), 80 * 2**30)


def test_a_near_miss_shows_the_digits_that_differ() -> None:
    """'79.6 GiB exceeds 79.6 GiB' said nothing (issue 39): as many decimals as the two numbers need."""
    w = workload_from_mapping({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 8},
                               "parallel": {"tp": 1, "pp": 1, "zero": 0}})
    need = memory(w).total_bytes
    with pytest.raises(InfeasiblePlan, match=r"GiB\) exceeds the GPU's HBM \([0-9.]+ GiB\) by 1 MiB") as exc:
        check_fits(memory(w), need - 2**20)
    shown = str(exc.value).split("(")[1:3]
    assert shown[0].split(" GiB")[0] != shown[1].split(" GiB")[0]


def test_unknown_preset_names_nearest() -> None:
    with pytest.raises(SpecError, match=r"model.preset \('llama3-8'\).*did you mean llama3-8b"):
        workload_from_mapping({"model": {"preset": "llama3-8"}, "training": {"global_batch": 8}})


def test_fp32_training_keeps_4_byte_weights_and_activations_and_no_master_copy() -> None:
    mixed = _gpt(dp=1, zero=0)
    full = _gpt(dp=1, zero=0)
    full["training"] = {"global_batch": 64, "recompute": "full", "precision": "fp32"}
    m16, m32 = memory(workload_from_mapping(mixed)), memory(workload_from_mapping(full))
    assert m32.weights_bytes == pytest.approx(2 * m16.weights_bytes)
    # Megatron-Core's gradient buffer is in the weights' dtype when reduced in bf16 (the default grad_comm_dtype)
    assert m32.grads_bytes == pytest.approx(2 * m16.grads_bytes)
    assert m32.optimizer_bytes == pytest.approx(m16.optimizer_bytes * 8 / 12)  # m, v; no fp32 master
    assert m32.activations_bytes == pytest.approx(2 * m16.activations_bytes)


def test_autograd_accumulation_keeps_gradients_in_the_weights_dtype() -> None:
    # fp32 main_grad (4 bytes) when reduced in fp32; PyTorch's .grad in bf16 (2 bytes) when autograd accumulates
    fp32_reduce = _gpt(dp=8, zero=1)
    fp32_reduce["training"] = {"global_batch": 64, "recompute": "full", "grad_comm_dtype": "fp32"}
    fused = memory(workload_from_mapping(fp32_reduce))
    auto = _gpt(dp=8, zero=1)
    auto["training"] = {"global_batch": 64, "recompute": "full", "grad_accumulation": "autograd"}
    m = memory(workload_from_mapping(auto))
    assert m.grads_bytes == pytest.approx(fused.grads_bytes / 2)
    assert m.grads_bytes == pytest.approx(m.weights_bytes)
    assert m.optimizer_bytes == fused.optimizer_bytes


def _llama(pp: int, vp: int = 1, **training: object) -> dict[str, object]:
    return {"model": {"preset": "llama3-8b"},
            "training": {"global_batch": 64, "micro_batch": 1, "recompute": "selective", **training},
            "parallel": {"tp": 2, "pp": pp, "dp": 1, "vp": vp}}


def test_logits_and_loss_bytes_by_cross_entropy_path() -> None:
    # N = 8192 tokens x 128256 / tp 2 logits on the last stage: Megatron's fp32 copy beside the bf16 logits (2 + 4),
    # fp32 training's .float() is the same tensor (4), the fused loss works in the logits (2), the gathered loss
    # holds the whole vocabulary on every TP rank: two micro-batches' logits and three fp32 buffers (2 x 2 + 12)
    n = 8192 * 128256 / 2
    for path, per_logit in (("megatron", 6.0), ("megatron_fused", 6.0), ("fused", 2.0), ("gathered", 2 * 16.0)):
        w = workload_from_mapping(_llama(1, cross_entropy=path))
        assert logits_bytes(w) == pytest.approx(n * per_logit), path
    fp32 = workload_from_mapping(_llama(1, precision="fp32"))
    assert logits_bytes(fp32) == pytest.approx(n * 4.0)


def test_pp1_holds_the_logits_and_both_ends() -> None:
    w = workload_from_mapping(_llama(1))
    m = memory(w)
    assert m.stage == "only"
    assert m.logits_bytes == pytest.approx(logits_bytes(w))
    assert m.weights_bytes == pytest.approx(2.0 * sum(params(w.model)) / 2)  # bf16, all of it over tp 2
    assert m.total_bytes == pytest.approx(sum(m.parts.values()))
    assert set(m.to_json()) == {"weights_gib", "grads_gib", "optimizer_gib", "activations_gib", "logits_gib",
                                "workspace_gib", "total_gib", "stage"}


def test_stage_params_add_up_to_the_model() -> None:
    for spec in (_llama(4), {"model": {"preset": "mixtral-8x7b"}, "training": {"global_batch": 64},
                             "parallel": {"tp": 2, "pp": 4, "ep": 4, "dp": 4}}):
        w = workload_from_mapping(spec)
        p = w.parallel
        per_stage = w.model.layers // p.pp
        total = sum(stage_params(w, per_stage, int(r == 0) + int(r == p.pp - 1)) for r in range(p.pp))
        dense, expert = params(w.model)
        assert total == pytest.approx(dense / p.tp + expert / (p.tp * p.ep))


def test_the_last_stage_is_the_most_loaded_when_its_logits_outweigh_the_first_stages_activations() -> None:
    # 4 stages of 8 layers, a 256k vocabulary, full recompute: the first rank keeps 4 micro-batches of layer
    # inputs (4 x 8 x s h e), the last one micro-batch of them and 8192 x 256000 / 2 logits at 6 bytes
    big = {"model": {"preset": "llama3-8b", "vocab": 256000}, "training": {"global_batch": 64, "recompute": "full"},
           "parallel": {"tp": 2, "pp": 4, "dp": 1}}
    m = memory(workload_from_mapping(big))
    assert m.stage == "last"
    assert m.logits_bytes == pytest.approx(8192 * 256000 / 2 * 6.0)
    small = dict(big, model={"preset": "llama3-8b", "vocab": 32000}, training={"global_batch": 64})
    assert memory(workload_from_mapping(small)).stage == "first"


def test_first_rank_keeps_pp_plus_pp_minus_1_over_vp_stages_of_activations() -> None:
    # Megatron-Core's interleaved order: rank 0 holds pp*vp + pp - 1 chunks of layers/vp each (the closed form
    # pp + (pp - 1)/vp stages' worth), 1F1B pp micro-batches; both as the walked schedule gives them
    for vp in (1, 2):
        w = workload_from_mapping(_llama(4, vp=vp))
        per_stage = activation_bytes_per_layer(w) * w.model.layers // 4
        assert memory(w).activations_bytes == pytest.approx(per_stage * (4 if vp == 1 else 4 + 3 / vp))


def test_uneven_ends_make_the_second_rank_the_most_loaded() -> None:
    # Llama 3 405B's layout (Dubey et al. 2024 Sec. 3.3.2: one layer fewer on the first and the last stage, for
    # the embedding's and the logits' memory): 7 + 14 x 8 + 7 layers over pp 16, vp 8; rank 1's eighth layer
    # outweighs rank 0's embedding and its two more chunks in flight
    w = workload_from_mapping({"model": {"preset": "llama3-405b"},
                               "training": {"global_batch": 128, "micro_batch": 1, "recompute": "none"},
                               "parallel": {"tp": 8, "pp": 16, "dp": 1, "vp": 8, "first_stage_layers": 7,
                                            "last_stage_layers": 7}})
    assert memory(w).stage == "middle"


def test_infeasible_plan_names_the_pipeline_stage() -> None:
    w = workload_from_mapping({"model": {"preset": "gpt3-175b"}, "training": {"global_batch": 8},
                               "parallel": {"tp": 1, "pp": 2, "zero": 0}})
    with pytest.raises(InfeasiblePlan, match=r"memory per GPU on the (first|last) pipeline stage \("):
        check_fits(memory(w), 80 * 2**30)


def test_logits_bytes_match_pytorchs_peak_on_this_machine() -> None:
    # benchmarks/loss_memory.py runs both losses (Megatron's ops re-enacted, PyTorch's cross_entropy as Aleph
    # Alpha's scaling calls it) and exits 1 when the peak resident bytes per logit are off the model by > 5%
    pytest.importorskip("torch")
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "loss_memory.py"
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout)
    assert set(result) >= {"megatron", "gathered"}


def test_a_nearly_full_gpu_is_warned_of_fragmentation_and_nccl_buffers() -> None:
    """A plan at 98% of HBM said nothing of the allocator's fragmentation or NCCL's buffers (issue 39): under
    GMLake's measured average (9.2 GB held unusable) free, the sentence says what it leaves out."""
    from slowlink.workload.memory import FRAGMENTATION_BYTES

    w = workload_from_mapping({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 8},
                               "parallel": {"tp": 1, "pp": 1, "zero": 0}})
    m = memory(w)
    tight = m.sentence(m.total_bytes / 0.98)
    assert "GiB free" in tight and "9.2 GB" in tight and "expandable_segments" in tight and "NCCL_BUFFSIZE" in tight
    roomy = m.sentence(m.total_bytes + 2 * FRAGMENTATION_BYTES)
    assert "free" not in roomy and "GMLake" not in roomy
