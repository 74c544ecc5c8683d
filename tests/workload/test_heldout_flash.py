"""Held-out flash-attention runs on A100 (heldout_runs.yaml): the MFU conversions and the single-node check.

Hagemann et al. 2023 report PaLM's MFU, (6N + 12 l h s) per token with N every parameter (both 128k
embeddings); Dao 2023 (FlashAttention-2, Table 1) TFLOP/s per A100 counted as 6 s N + 12 l h s^2. The YAML
stores MFU in slowlink's convention (flops.model_flops_per_step); these tests redo the conversion.
"""

from __future__ import annotations

from importlib import resources

import pytest
import yaml

from slowlink.spec.workload import workload_from_mapping
from slowlink.workload.flops import model_flops_per_step
from slowlink.workload.validate import heldout_cases

A100_BF16_PEAK_FLOP_S = 312e12  # A100 datasheet, dense BF16 tensor core

# (case id, MFU as the source prints it): Hagemann et al. 2023, the authors' per-run sheets (trial in the YAML)
HAGEMANN_PALM_MFU = {
    "hag23-llama13b-2k-64": 0.7057311797718144, "hag23-llama13b-2k-32": 0.6966049821464876,
    "hag23-llama13b-8k-128": 0.5940764888411169, "hag23-llama13b-8k-64-sp": 0.627809079053799,
    "hag23-llama30b-2k-64": 0.6198292355704881, "hag23-llama30b-2k-256": 0.4921671127925943,
    "hag23-llama30b-8k-64-sp": 0.602241492045547, "hag23-llama30b-8k-128": 0.5139865409879872,
    "hag23-llama65b-2k-64-sp": 0.5961898893243276, "hag23-llama65b-2k-128": 0.5526181031211296,
}
# (case id, TFLOP/s per A100, learned position embeddings): Dao 2023, Table 1, FlashAttention-2 column
FA2_TFLOPS = {"fa2-gpt1.3b-2k": (196, True), "fa2-gpt1.3b-8k": (220, True),
              "fa2-gpt2.7b-2k": (205, True), "fa2-gpt2.7b-8k": (225, False)}


def _cases() -> dict[str, dict[str, object]]:
    text = resources.files("slowlink.workload.data").joinpath("heldout_runs.yaml").read_text("utf-8")
    return {c["id"]: c for c in yaml.safe_load(text)["cases"]}


def _ours_per_token(case: dict[str, object]) -> tuple[float, int, int, int, int, int]:
    w = workload_from_mapping(case["workload"], str(case["id"]))
    m = w.model
    per_token = model_flops_per_step(m, 1) / m.seq_len
    return per_token, m.layers, m.hidden, m.ffn_hidden, m.vocab, m.seq_len


@pytest.mark.parametrize("case_id", sorted(HAGEMANN_PALM_MFU))
def test_hagemann_mfu_is_converted_from_palm_convention(case_id: str) -> None:
    ours, layers, h, f, v, s = _ours_per_token(_cases()[case_id])
    n_all = layers * (4 * h * h + 3 * h * f + 2 * h) + h + 2 * v * h  # matrices, RMSNorms, untied embeddings
    palm = 6 * n_all + 12 * layers * h * s
    assert _cases()[case_id]["mfu"] == pytest.approx(HAGEMANN_PALM_MFU[case_id] * ours / palm, abs=1e-4)


@pytest.mark.parametrize("case_id", sorted(FA2_TFLOPS))
def test_fa2_mfu_is_converted_from_the_papers_formula(case_id: str) -> None:
    tflops, learned_positions = FA2_TFLOPS[case_id]
    ours, layers, h, _, v, s = _ours_per_token(_cases()[case_id])
    n = 12 * layers * h * h + 13 * layers * h + 2 * h + v * h + (s * h if learned_positions else 0)  # GPT-2, tied
    src = 6 * n + 12 * layers * h * s
    assert _cases()[case_id]["mfu"] == pytest.approx(tflops * 1e12 / A100_BF16_PEAK_FLOP_S * ours / src, abs=1e-4)


def test_single_node_flash_runs_within_five_percent() -> None:
    # FlashAttention-2 Table 1: one node, data parallel only, so the compute model alone sets the step
    # (predicted -4.2% to +3.3% when these rows were added; no constant was set from them).
    errs = {c.id: c.error for c in heldout_cases() if c.id in FA2_TFLOPS}
    assert len(errs) == 4
    assert all(abs(e) <= 0.05 for e in errs.values()), errs
