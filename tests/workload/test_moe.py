"""MoE dispatch traffic and the cross-entropy passes (Megatron-Core core_r0.10.0), and where the step charges them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from slowlink.catalog import load_catalog
from slowlink.spec.workload import Workload, workload_from_mapping
from slowlink.workload import moe
from slowlink.workload.comm import CommCost, groups_of
from slowlink.workload.compute import ELEMENTWISE_RW, layer_compute, layer_gemms, logits_compute_s
from slowlink.workload.kernels import SHORT_KERNEL_S
from slowlink.workload.loss import cross_entropy_bytes
from slowlink.workload.memory import activation_bytes_per_layer
from slowlink.workload.moe import (
    ROUTER_BACKWARD_OPS,
    ROUTER_FORWARD_OPS,
    dispatch_bytes,
    expert_activation_bytes,
    routed_bytes,
    router_kernels_s,
    token_count_bytes,
)
from slowlink.workload.traffic import ep_layer, tp_layer

H100 = load_catalog([]).gpu("h100-sxm")
GROK = {"layers": 2, "hidden": 6144, "heads": 48, "kv_heads": 8, "ffn_hidden": 32768, "vocab": 128512,
        "seq_len": 4096, "gated_mlp": True, "moe": {"experts": 8, "top_k": 2, "expert_ffn_hidden": 32768}}


def grok(ep: int = 8, tp: int = 4, precision: str = "bf16", **model: Any) -> Workload:
    return workload_from_mapping({
        "model": GROK | model,
        "training": {"global_batch": 64, "micro_batch": 1, "precision": precision, "recompute": "none",
                     "flash_attention": False},
        "parallel": {"tp": tp, "pp": 1, "ep": ep, "dp": 8, "sequence_parallel": True}})


def unit_cost(op: str, size: float, groups: list[list[int]]) -> float:
    """Every collective costs its size in seconds (GB -> s), to see which sizes are charged."""
    return size / 1e9


def test_dispatch_bytes_count_permute_and_unpermute_passes() -> None:
    w = grok()
    n, row = 4096 / 4, 6144 * 2.0  # SP-local tokens, one bf16 row
    r = 2 * n
    # backward also adds the layer input's two gradients (router GEMM, permute): read 2n, write n
    assert dispatch_bytes(w) == pytest.approx(((5 * r + 2 * n) * row, (7 * r + 2 * n + 3 * n) * row))
    # with 4 local experts the gathered tp x r rows are sorted by expert and back (4 tp r) and SequentialMLP
    # concatenates the experts' outputs forward and their input gradients backward (2 tp r)
    f, b = dispatch_bytes(grok(ep=2))
    assert (f - dispatch_bytes(w)[0], b - dispatch_bytes(w)[1]) == pytest.approx((6 * 4 * r * row,) * 2)
    # a shared expert is a third user of the layer input: one more gradient sum
    shared = grok(moe={"experts": 8, "top_k": 2, "expert_ffn_hidden": 32768, "shared_experts": 1})
    assert dispatch_bytes(shared)[1] - dispatch_bytes(w)[1] == pytest.approx(3 * n * row)
    dense = grok(moe=None)
    assert dispatch_bytes(dense) == (0.0, 0.0) and expert_activation_bytes(dense) == 0.0


def test_expert_activations_are_top_k_times_the_gathered_tokens() -> None:
    w = grok()
    tokens = 4096.0
    experts = 2.0 * tokens * (6144 + 3 * 32768 / 4)  # first GEMM input + GeGLU input (2f) + second GEMM input
    # in place of the dense MLP's gate/up outputs and second GEMM input (ffn 32768, /4); its input (the
    # router's and shared experts' input) stays counted in the layer
    dense_inner = 2.0 * tokens * 3 * 32768 / 4
    assert expert_activation_bytes(w) == pytest.approx(2.0 * experts - dense_inner)


def _elementwise_forward_s(w: Workload) -> float:
    """Forward seconds of one layer that its elementwise rate sets: at 1e12 B/s, less at an endless rate."""
    slow, fast = replace(H100, elementwise_bw=1e12), replace(H100, elementwise_bw=1e30)
    return layer_compute(w, slow).forward_s - layer_compute(w, fast).forward_s


def test_layer_compute_charges_moe_traffic_at_the_elementwise_rate() -> None:
    w = grok()
    kept = ELEMENTWISE_RW * (activation_bytes_per_layer(w, recompute="none") + expert_activation_bytes(w))
    assert _elementwise_forward_s(w) == pytest.approx((kept + dispatch_bytes(w)[0]) / 1e12, rel=1e-6)


def test_flash_attention_keeps_the_expert_activations_traffic() -> None:
    # flash attention removes only the attention core's softmax/dropout traffic, not the experts'
    w = grok()
    w = replace(w, training=replace(w.training, **{"flash_attention": True}))
    kept = ELEMENTWISE_RW * (activation_bytes_per_layer(w, recompute="selective") + expert_activation_bytes(w))
    assert _elementwise_forward_s(w) == pytest.approx((kept + dispatch_bytes(w)[0]) / 1e12, rel=1e-6)


def test_cross_entropy_passes_and_their_time_on_the_last_stage() -> None:
    w = grok()
    n = 4096 * 128512 / 4
    assert cross_entropy_bytes(w) == pytest.approx(52.0 * n)  # bf16 logits: two casts of 6 bytes + 40 fp32
    assert cross_entropy_bytes(grok(precision="fp32")) == pytest.approx(40.0 * n)  # no casts
    fused = replace(w, training=replace(w.training, **{"cross_entropy": "fused"}))
    assert cross_entropy_bytes(fused) == pytest.approx(3.0 * 2.0 * n)
    slow, fast = replace(H100, elementwise_bw=1e12), replace(H100, elementwise_bw=1e30)
    assert logits_compute_s(w, slow) - logits_compute_s(w, fast) == pytest.approx(52.0 * n / 1e12, rel=1e-6)


def test_dispatcher_gathers_routed_tokens_over_tp_even_without_ep() -> None:
    cost: CommCost = unit_cost
    tp_only = ep_layer(grok(ep=1), cost)
    gathered = routed_bytes(grok(ep=1)) * 4
    counts = token_count_bytes(grok()) / 1e9  # the aux loss's all-reduce, forward only
    assert tp_only.total_s == pytest.approx(2.0 * 2.0 * gathered / 1e9 + counts)  # AG + RS, forward and backward
    both = ep_layer(grok(), cost)
    assert both.total_s == pytest.approx(tp_only.total_s + 4.0 * routed_bytes(grok()) / 1e9)
    assert both.exposed_s == both.total_s


def test_aux_loss_all_reduces_int64_counts_over_the_tp_cp_group() -> None:
    seen: list[tuple[str, float, int]] = []

    def record(op: str, size: float, groups: list[list[int]]) -> float:
        seen.append((op, size, len(groups[0])))
        return 0.0

    w = workload_from_mapping({
        "model": GROK, "training": {"global_batch": 64, "micro_batch": 1, "precision": "bf16", "recompute": "full"},
        "parallel": {"tp": 4, "cp": 2, "pp": 1, "ep": 8, "dp": 8, "sequence_parallel": True}})
    ep_layer(w, record)
    # forward and the recomputed forward; 8 experts x 8 bytes over the 4 x 2 TP x CP ranks (consecutive: tp, cp fastest)
    assert [s for s in seen if s[0] == "all_reduce"] == [("all_reduce", 64.0, 8)]
    assert groups_of(w.parallel, "tp_cp")[0] == list(range(8))
    # one call, priced twice: the cost is multiplied, not re-asked
    total = ep_layer(w, lambda op, size, groups: 1.0 if op == "all_reduce" else 0.0).total_s
    assert total == pytest.approx(2.0)
    assert token_count_bytes(grok(moe=None)) == 0.0


def test_router_ops_cost_one_short_kernel_each(monkeypatch: pytest.MonkeyPatch) -> None:
    w = grok()
    fwd, bwd = sum(k for _, k in ROUTER_FORWARD_OPS), sum(k for _, k in ROUTER_BACKWARD_OPS)
    assert (fwd, bwd) == (32, 16)
    assert router_kernels_s(w) == pytest.approx((fwd * SHORT_KERNEL_S, bwd * SHORT_KERNEL_S))
    assert router_kernels_s(grok(moe=None)) == (0.0, 0.0)
    # layer_compute charges them: one second per kernel adds exactly the counts
    base = layer_compute(w, H100)
    monkeypatch.setattr(moe, "SHORT_KERNEL_S", 1.0)
    slow = layer_compute(w, H100)
    assert slow.forward_s - base.forward_s == pytest.approx(fwd * (1.0 - SHORT_KERNEL_S))
    assert slow.backward_s - base.backward_s == pytest.approx(bwd * (1.0 - SHORT_KERNEL_S))


def test_router_gemm_sees_the_sp_local_tokens() -> None:
    # 4096 tokens over TP 4 with SP: the gating GEMM is (1024, experts, h), not the whole micro-batch
    router = [g for g in layer_gemms(grok()) if g.n == 8]
    assert [(g.m, g.k) for g in router] == [(1024.0, 6144)]
    no_sp = replace(grok(), parallel=replace(grok().parallel, **{"sequence_parallel": False}))
    assert [g.m for g in layer_gemms(no_sp) if g.n == 8] == [4096.0]


def test_a_routed_only_moe_layer_has_only_attention_tp_collectives() -> None:
    cost: CommCost = unit_cost
    dense = grok(moe=None)
    assert tp_layer(grok(), cost).total_s == pytest.approx(tp_layer(dense, cost).total_s / 2)
    shared = grok(moe={"experts": 8, "top_k": 2, "expert_ffn_hidden": 32768, "shared_experts": 1})
    assert tp_layer(shared, cost).total_s == pytest.approx(tp_layer(dense, cost).total_s)


def test_sequential_mlp_launches_each_local_expert_on_its_own() -> None:
    experts = [g for g in layer_gemms(grok(ep=2)) if g.m == 4096 * 2 * 2 / 8]
    assert len(experts) == 2 * 4 and all(g.batch == 1 for g in experts)
