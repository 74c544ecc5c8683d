"""Activation bytes per layer: Korthikanti et al. 2022 Sec. 4.1 tensor by tensor, for GPT and Llama-style layers."""

from __future__ import annotations

from typing import Any

import pytest

from slowlink.spec.workload import Workload, workload_from_mapping
from slowlink.workload.memory import activation_bytes_per_layer, mlp_kept_per_token


def layer(model: dict[str, Any], tp: int = 8, sp: bool = True, recompute: str = "none", flash: bool = False,
          precision: str = "fp16", micro_batch: int = 1) -> Workload:
    return workload_from_mapping({
        "model": model,
        "training": {"global_batch": 64, "micro_batch": micro_batch, "precision": precision,
                     "recompute": recompute, "flash_attention": flash},
        "parallel": {"tp": tp, "pp": 1, "dp": 1, "sequence_parallel": sp}})


@pytest.mark.parametrize(("tp", "sp", "flash", "recompute"), [
    (8, True, False, "none"), (8, False, False, "none"), (1, False, False, "none"), (4, True, True, "none"),
    (8, True, False, "selective"), (8, False, True, "selective"), (8, True, False, "full"), (2, False, False, "full")])
def test_gpt_layer_is_korthikanti_table_2(tp: int, sp: bool, flash: bool, recompute: str) -> None:
    # Korthikanti et al. 2022 Table 2, 16-bit: sbh(10 + 24/t + 5as/(ht)), with SP sbh(34/t + 5as/(ht)),
    # selective (and flash) drop the 5as/(ht) term, full keeps 2sbh (/t with SP).
    s, b, h, a = 2048, 2, 12288, 96
    w = layer({"preset": "k22-175b"}, tp=tp, sp=sp, flash=flash, recompute=recompute, micro_batch=b)
    split = tp if sp else 1
    core = 0.0 if flash or recompute == "selective" else 5 * a * s / (h * tp)
    expected = 2 * s * b * h / split if recompute == "full" else s * b * h * (
        (34 / tp if sp else 10 + 24 / tp) + core)
    assert activation_bytes_per_layer(w) == pytest.approx(expected, rel=1e-12)


def test_llama3_70b_layer_by_hand() -> None:
    # Llama 3 70B (Dubey et al. 2024 Table 3): h 8192, 64 heads, 8 KV heads (h_kv 1024), SwiGLU ffn 28672,
    # RMSNorm, no dropout; s 8192, b 1, bf16, TP 8 with SP, flash attention, no recompute. Per token, 2 bytes:
    norms = 2 * 8192 / 8  # the two RMSNorms' inputs (SP: /t)
    qkv_in = 8192 / 8  # QKV GEMM input
    qkv = (8192 + 2 * 1024) / 8  # Q, K, V
    proj_in = 8192 / 8  # output projection input
    mlp_in = 8192 / 8  # first MLP GEMM input
    mlp = 3 * 28672 / 8  # gate and up outputs (kept by the fused SwiGLU), the second GEMM's input
    expected = 8192 * 2 * (norms + qkv_in + qkv + proj_in + mlp_in + mlp)  # no dropout masks
    w = layer({"preset": "llama3-70b"}, flash=True, precision="bf16")
    assert activation_bytes_per_layer(w) == pytest.approx(expected, rel=1e-12)
    # 33.5 sbh/t bytes against Table 2's 34: GQA (-4.75) and no masks (-2) offset the gated ffn 3.5h (+6.25)
    assert activation_bytes_per_layer(w) / (8192 * 8192 * 34 / 8) == pytest.approx(33.5 / 34, rel=1e-12)


def test_dropout_adds_its_masks_and_the_attention_core_keeps_softmax_output_only_without_it() -> None:
    s, h, a, tp = 2048, 12288, 96, 8
    gpt = layer({"preset": "k22-175b"}, sp=False)
    plain = layer({"preset": "k22-175b", "dropout": False}, sp=False)
    # two 1-byte masks of h per token (replicated without SP) and, unfused, the score dropout's mask (1 byte)
    # and output (2 bytes): 5as^2b/t -> 2as^2b/t
    assert activation_bytes_per_layer(gpt) - activation_bytes_per_layer(plain) == pytest.approx(
        s * (2 * h + 3 * a * s / tp), rel=1e-12)


def test_gqa_shrinks_only_k_and_v() -> None:
    mha = layer({"preset": "llama2-70b", "kv_heads": 64}, flash=True)
    gqa = layer({"preset": "llama2-70b"}, flash=True)  # 8 KV heads: K and V 1024 wide instead of 8192
    assert activation_bytes_per_layer(mha) - activation_bytes_per_layer(gqa) == pytest.approx(
        4096 * 2 * 2 * (8192 - 1024) / 8, rel=1e-12)


def test_mlp_share_gated_keeps_three_ffn_tensors_non_gated_two() -> None:
    assert mlp_kept_per_token(1024.0, 4096, False, 4) == 1024.0 + 2 * 1024
    assert mlp_kept_per_token(0.0, 4096, True, 4) == 3 * 1024


def test_dropout_per_preset_and_override() -> None:
    def dropout(model: dict[str, Any]) -> bool:
        return layer(model).model.dropout

    assert dropout({"preset": "gpt3-175b"}) and dropout({"preset": "n21-1t"})
    assert not dropout({"preset": "llama3-405b"}) and not dropout({"preset": "mixtral-8x7b"})
    custom = {"layers": 2, "hidden": 1024, "heads": 8, "ffn_hidden": 4096, "vocab": 1000, "seq_len": 128,
              "gated_mlp": False}
    assert dropout(custom) and not dropout(custom | {"dropout": False})  # legacy default: dropout
    assert dropout({"preset": "llama3-8b", "dropout": True})


def test_an_unfused_swiglu_also_keeps_silu_of_the_gate() -> None:
    # silu(gate) * up as two ops (Aleph Alpha's scaling core/nn/mlp.py): gate, up, SiLU(gate), product: 4 ffn/t
    assert mlp_kept_per_token(0.0, 4096, True, 4, fused=False) == 4 * 1024
    assert mlp_kept_per_token(0.0, 4096, False, 4, fused=False) == 2 * 1024  # no gate, nothing to fuse
    fused = layer({"preset": "llama3-70b"}, flash=True, precision="bf16")
    unfused = workload_from_mapping({
        "model": {"preset": "llama3-70b"},
        "training": {"global_batch": 64, "precision": "bf16", "recompute": "none", "fused_swiglu": False},
        "parallel": {"tp": 8, "pp": 1, "dp": 1}})
    extra = activation_bytes_per_layer(unfused) - activation_bytes_per_layer(fused)
    assert extra == pytest.approx(8192 * 2 * 28672 / 8, rel=1e-12)  # one ffn/t tensor per token, 2 bytes
