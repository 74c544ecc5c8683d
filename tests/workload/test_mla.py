"""Multi-head latent attention and the DeepSeek-V3 preset against its published parameter counts.

Sources: DeepSeek-V3 technical report (arXiv 2412.19437) Sec. 2.1.1 (MLA) and 4.2 (hyper-parameters); the
released config.json (huggingface.co/deepseek-ai/DeepSeek-V3); README_WEIGHTS.md of the same release: "Total
parameters: 671B", "Activation parameters: 36.6B (including 0.9B for the output Head)", the MTP module's 11.5B
unique parameters apart.
"""

from __future__ import annotations

import pytest

from slowlink.errors import SpecError
from slowlink.spec.workload import ModelSpec, resolve_model, workload_from_mapping
from slowlink.workload.compute import attention_gemms, layer_gemms
from slowlink.workload.flops import active_params, layer_forward, params
from slowlink.workload.memory import activation_bytes_per_layer

H, HEADS, V = 7168, 128, 129280


def _v3() -> object:
    return resolve_model(ModelSpec(preset="deepseek-v3-like"))


def test_mla_matrices_follow_deepseek_v3_config() -> None:
    # wq_a 7168x1536, wq_b 1536 -> 128 x (128 + 64), wkv_a 7168 -> 512 + 64, wkv_b 512 -> 128 x (128 + 128),
    # wo 128 x 128 -> 7168 (config.json; inference/model.py MLA)
    m = _v3()
    assert m.attention_matrices() == ((1536, H, False), (HEADS * 192, 1536, True), (576, H, False),
                                      (HEADS * 256, 512, True), (H, HEADS * 128, True))
    assert sum(o * i for o, i, _ in m.attention_matrices()) == 187_105_280


def test_deepseek_v3_preset_is_671b_total_and_36_6b_active() -> None:
    m = _v3()
    attn = 61 * (187_105_280 + 1536 + 512 + 4 * H)            # 11.41e9: MLA matrices, latent norms, 4h of norms
    dense_mlp = 3 * 3 * H * 18432                               # 1.19e9: layers 0-2 (first_k_dense_replace)
    shared_router = 58 * (3 * H * 2048 + H * 256)               # 2.66e9: 58 MoE layers' shared expert + router
    routed = 58 * 256 * 3 * H * 2048                            # 653.9e9: 256 routed experts of 2048
    vocab = 2 * V * H                                           # 1.85e9: embedding and output head, untied
    dense, expert = params(m)
    assert (dense, expert) == (attn + dense_mlp + shared_router + vocab, routed)
    assert dense + expert == pytest.approx(671e9, rel=1e-3)     # README_WEIGHTS.md: 671B (MTP module apart)
    # active: top 8 of 256 routed experts, no input embedding (a lookup): 36.6B, README_WEIGHTS.md
    assert active_params(m) == pytest.approx(36.6e9, rel=2e-3)


def test_presets_without_attention_keep_mha() -> None:
    m = resolve_model(ModelSpec(preset="llama3-70b"))
    assert m.mla is None and m.qk_head_dim == m.v_head_dim == 128
    assert m.attention_matrices() == ((8192 + 2 * 1024, 8192, True), (8192, 8192, True))


def test_mla_flops_and_activations_use_its_widths() -> None:
    w = workload_from_mapping({"model": {"preset": "deepseek-v3-like"}, "training": {"global_batch": 8},
                               "parallel": {"tp": 1, "ep": 1}})
    s = 4096
    lf = layer_forward(w.model, 1)
    assert lf.attn_core == 2.0 * s * s * HEADS * (192 + 128)    # Q K^T at d 192, A V at d 128
    # dense layers' MLP (18432) and a MoE layer's active 9 x 2048 are the same GEMM size; router 256 wide
    mlp = 2.0 * s * H * 3 * 18432 + 58 / 61 * 2.0 * s * H * 256
    assert lf.gemm == pytest.approx(2.0 * s * 187_105_280 + mlp)
    scores, context = attention_gemms(w)
    assert (scores.k, context.n) == (192, 128)
    assert [g.n for g in layer_gemms(w)[:5]] == [1536, HEADS * 192, 576, HEADS * 256, H]
    # Q, K (192 per head), V and the output's input (128 per head), and the two latents, at 2 bytes
    per_token = 2 * (3 * H + HEADS * (192 + 192 + 128 + 128) + 1536 + 512)
    assert activation_bytes_per_layer(w, "selective") > s * per_token


def test_mla_fields_need_attention_mla() -> None:
    with pytest.raises(SpecError, match="kv_lora_rank need attention mla"):
        resolve_model(ModelSpec(preset="llama3-8b", kv_lora_rank=512))
    with pytest.raises(SpecError, match="attention mla needs"):
        resolve_model(ModelSpec(preset="llama3-8b", attention="mla", kv_lora_rank=512))
