"""workload.sac: torchtitan's op-level selective activation checkpointing (save every matrix output but every second
one, the attention and reduce-scatter outputs; recompute the rest), worked by hand on Llama 3 8B."""

from __future__ import annotations

from pathlib import Path

import pytest

from slowlink.errors import SpecError
from slowlink.spec.cluster import load_cluster
from slowlink.spec.workload import Workload, workload_from_mapping
from slowlink.workload.flops import hardware_flops_per_step, model_flops_per_step
from slowlink.workload.memory import activation_bytes_per_layer
from slowlink.workload.sac import block_matmuls
from slowlink.workload.step import plan

CLUSTER = load_cluster(Path(__file__).resolve().parents[2] / "examples" / "ref-64gpu.yaml")
H, KV, FFN = 4096, 1024, 14336  # Llama 3 8B: 32 heads of 128, 8 KV heads, SwiGLU 14,336


def _w(recompute: str = "op_selective", tp: int = 1) -> Workload:
    return workload_from_mapping({"model": {"preset": "llama3-8b", "seq_len": 8192},
                                  "training": {"global_batch": 128, "micro_batch": 2, "recompute": recompute},
                                  "parallel": {"tp": tp, "dp": 64 // tp, "zero": 3}, "stack": "torchtitan"}, "w.yaml")


def test_every_second_matmul_is_recomputed() -> None:
    mms = block_matmuls(_w().model)
    # wq, wk, wv, wo, w1, w3, w2: the 1st, 3rd, 5th and 7th outputs are kept
    assert [(mm.out, mm.inp) for mm in mms] == [(H, H), (KV, H), (KV, H), (H, H), (FFN, H), (FFN, H), (H, FFN)]
    assert [mm.saved for mm in mms] == [True, False, True, False, True, False, True]


def test_kept_bytes_per_layer_by_hand() -> None:
    # per token, 2 bytes an element: the block input (4096), wq (4096), wv (1024), w1 (14336) and w2 (4096) outputs,
    # the attention output (4096); the logsumexp 4 bytes x 32 heads
    per_token = 2 * (H + H + KV + FFN + H + H) + 4 * 32
    assert per_token == 63_616
    assert activation_bytes_per_layer(_w()) == 2 * 8192 * per_token
    # TP 2 with SP: the input and the two reduce-scatter outputs split by 2, the column outputs by 2, the row
    # outputs (wo's is recomputed, w2's kept) whole
    tp2 = 2 * (H / 2 + H / 2 + KV / 2 + FFN / 2 + H + H / 2 + 2 * H / 2) + 4 * 32 / 2
    assert activation_bytes_per_layer(_w(tp=2)) == pytest.approx(2 * 8192 * tp2)


def test_recomputed_flops_are_the_unsaved_matmuls() -> None:
    w = _w()
    extra = hardware_flops_per_step(w.model, 128, "op_selective") - model_flops_per_step(w.model, 128)
    assert extra == pytest.approx(32 * 128 * 8192 * 2 * (KV * H + H * H + FFN * H))


def test_it_sits_between_selective_and_full() -> None:
    steps = {r: plan(_w(r), CLUSTER, check_memory=False) for r in ("selective", "op_selective", "full")}
    assert steps["selective"].step_time_s < steps["op_selective"].step_time_s < steps["full"].step_time_s
    kept = {r: s.memory.activations_bytes for r, s in steps.items()}
    assert kept["full"] < kept["op_selective"] < kept["selective"]


def test_the_sp_all_gathers_run_again() -> None:
    # with SP, 2 blocks x (3 all-gathers + 2 reduce-scatters) per layer and micro-batch, against 2 x (2 + 2)
    op, sel = plan(_w(tp=2), CLUSTER, check_memory=False), plan(_w("selective", tp=2), CLUSTER, check_memory=False)
    micro, layers = 128 // (2 * 32), 32
    assert op.collectives_per_step["tp"] - sel.collectives_per_step["tp"] == micro * layers * 2


def test_moe_blocks_are_refused() -> None:
    with pytest.raises(SpecError, match=r"training.recompute \(op_selective\): priced for dense blocks only"):
        workload_from_mapping({"model": {"preset": "mixtral-8x7b"},
                               "training": {"global_batch": 64, "recompute": "op_selective"}}, "w.yaml")
