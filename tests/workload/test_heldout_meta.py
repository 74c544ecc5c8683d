"""Held-out Llama 3 405B rows (heldout_runs.yaml): the layouts of Dubey et al. 2024 Table 4, the settings Sec. 3.3.2
states, and the MFU converted from PaLM's count (Chowdhery et al., which the paper cites for MFU) to ours."""

from __future__ import annotations

from importlib import resources

import pytest
import yaml

from slowlink.spec.cluster import cluster_from_mapping
from slowlink.spec.workload import Workload, workload_from_mapping
from slowlink.workload.flops import model_flops_per_step, params

H100_BF16_PEAK_TFLOP_S = 989.4  # H100 SXM datasheet, dense BF16 (catalog gpus.yaml)

# Dubey et al. 2024, Table 4: (GPUs, TP, CP, PP, DP, sequence length, sequences per DP group, TFLOP/s/GPU, MFU)
TABLE4 = {
    "llama3-405b-8k": (8192, 8, 1, 16, 64, 8192, 32, 430, 0.43),
    "llama3-405b-16k": (16384, 8, 1, 16, 128, 8192, 16, 400, 0.41),
    "llama3-405b-16k-128k-ctx": (16384, 8, 16, 16, 8, 131072, 16, 380, 0.38),
}


def _case(case_id: str) -> dict[str, object]:
    text = resources.files("slowlink.workload.data").joinpath("heldout_runs.yaml").read_text("utf-8")
    return next(c for c in yaml.safe_load(text)["cases"] if c["id"] == case_id)


def _workload(case_id: str) -> Workload:
    return workload_from_mapping(_case(case_id)["workload"], case_id)  # type: ignore[arg-type]


@pytest.mark.parametrize("case_id", sorted(TABLE4))
def test_layout_is_table_4(case_id: str) -> None:
    gpus, tp, cp, pp, dp, seq, per_dp, _, _ = TABLE4[case_id]
    w = _workload(case_id)
    p = w.parallel
    assert (p.tp, p.cp, p.pp, p.dp, w.model.seq_len) == (tp, cp, pp, dp, seq)
    assert cluster_from_mapping(_case(case_id)["cluster"], case_id).gpus == gpus  # type: ignore[arg-type]
    assert w.training.global_batch == per_dp * dp
    assert w.training.global_batch * seq == pytest.approx(16 * 2**20, rel=0.01)  # "16M" tokens per batch
    assert p.order == "tp-cp-pp-dp"  # Sec. 3.3.2: [TP, CP, PP, DP]


@pytest.mark.parametrize("case_id", sorted(TABLE4))
def test_settings_the_paper_states(case_id: str) -> None:
    t, p = _workload(case_id).training, _workload(case_id).parallel
    # Sec. 3.3.2: fp32 accumulation over micro-batches, fp32 reduce-scatter in FSDP; optimizer and gradients sharded
    assert (t.grad_comm_dtype, t.grad_accumulation, p.zero) == ("fp32", "autograd_fp32", 2)
    assert t.recompute == "none"  # "without activation checkpointing" (8K; assumed for 128K)
    # one layer fewer on the first and last stages, one-layer chunks: 16 x 8 - 2 = 126
    assert (p.vp, p.first_stage_layers, p.last_stage_layers) == (8, 7, 7)
    assert p.cp_impl == ("all_gather" if p.cp > 1 else "ring")


@pytest.mark.parametrize("case_id", sorted(TABLE4))
def test_mfu_is_the_printed_one_in_our_flop_count(case_id: str) -> None:
    w = _workload(case_id)
    m = w.model
    ours = model_flops_per_step(m, 1) / m.seq_len
    palm = 6 * sum(params(m)) + 12 * m.layers * m.hidden * m.seq_len  # full attention, N with both embeddings
    assert _case(case_id)["mfu"] == pytest.approx(TABLE4[case_id][8] * ours / palm, abs=1e-4)


def test_our_count_is_torchtitans() -> None:
    # torchtitan get_num_flop_per_token: 6 x (parameters - input embedding) + 12 l h s, no causal discount
    m = _workload("llama3-405b-16k-128k-ctx").model
    titan = 6 * (sum(params(m)) - m.vocab * m.hidden) + 12 * m.layers * m.hidden * m.seq_len
    norms = 6 * 4 * m.hidden * m.layers  # 6 x the norm weights flops.params counts (4 h per layer)
    assert model_flops_per_step(m, 1) / m.seq_len == pytest.approx(titan - norms, rel=1e-12)  # no GEMM: not ours


@pytest.mark.parametrize("case_id", ["llama3-405b-8k", "llama3-405b-16k-128k-ctx"])
def test_printed_tflops_and_mfu_share_the_dense_peak(case_id: str) -> None:
    *_, tflops, mfu = TABLE4[case_id]
    assert tflops / H100_BF16_PEAK_TFLOP_S == pytest.approx(mfu, abs=0.005)
