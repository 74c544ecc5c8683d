"""training.grad_accumulation: PyTorch's in-place AccumulateGrad pass over every local weight each micro-batch
(autograd), or nothing (fused into the weight-gradient GEMM, Megatron's default)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slowlink.errors import SpecError
from slowlink.spec.cluster import load_cluster
from slowlink.spec.workload import Workload, workload_from_mapping
from slowlink.workload.compute import grad_accumulation_s, layer_compute, logits_compute_s
from slowlink.workload.embedding import embedding_grad_bytes
from slowlink.workload.memory import layer_params_per_gpu, memory
from slowlink.workload.step import plan

EX = Path(__file__).parents[2] / "examples"


def _w(accumulation: str, tp: int = 2, pp: int = 2, grad_comm_dtype: str = "bf16") -> Workload:
    return workload_from_mapping({
        "model": {"preset": "llama3-8b"},
        "training": {"global_batch": 64, "micro_batch": 1, "grad_accumulation": accumulation,
                     "grad_comm_dtype": grad_comm_dtype},
        "parallel": {"tp": tp, "pp": pp, "dp": 2}}, "w.yaml")


def test_fused_costs_nothing() -> None:
    gpu = load_cluster(EX / "ref-64gpu.yaml").gpu
    assert grad_accumulation_s(_w("fused"), 1e9, gpu) == 0.0


def test_autograd_reads_old_and_new_and_writes_the_sum_in_the_weights_dtype() -> None:
    gpu = load_cluster(EX / "ref-64gpu.yaml").gpu
    # 1e9 bf16 weights: 3 passes x 2 bytes = 6 GB at the HBM bandwidth (no measured elementwise rate on this GPU)
    assert gpu.elementwise_bw is None
    assert grad_accumulation_s(_w("autograd"), 1e9, gpu) == pytest.approx(6e9 / gpu.hbm_bw_bytes_s)


def test_a_layer_holds_its_matrices_and_norms_split_by_tp() -> None:
    # Llama 3 8B layer: h 4096, 8 of 32 KV heads (h_kv 1024), ffn 14336 gated: 4096 x 6144 + 4096^2 + 3 x 4096 x
    # 14336 + 4 x 4096 (norms, as flops.params counts them)
    per_layer = 4096 * 6144 + 4096**2 + 3 * 4096 * 14336 + 4 * 4096
    assert layer_params_per_gpu(_w("autograd", tp=2)) == pytest.approx(per_layer / 2)


def test_autograd_lengthens_each_layers_backward_and_the_logits_only() -> None:
    gpu = load_cluster(EX / "ref-64gpu.yaml").gpu
    fused, auto = _w("fused"), _w("autograd")
    a, b = layer_compute(fused, gpu), layer_compute(auto, gpu)
    assert b.forward_s == a.forward_s
    assert b.backward_s - a.backward_s == pytest.approx(grad_accumulation_s(auto, layer_params_per_gpu(auto), gpu))
    head = 128256 / 2 * 4096
    assert logits_compute_s(auto, gpu) - logits_compute_s(fused, gpu) == pytest.approx(
        grad_accumulation_s(auto, head, gpu))


def test_autograd_embedding_gradient_is_written_then_added_in_bf16() -> None:
    # dense gradient written (2) + AccumulateGrad (3 x 2), as many as Megatron's 2 + 2 + bf16 main_grad 2 + 2 (reduced
    # in bf16); 2 + 2 + 4 + 4 with an fp32 main_grad (grad_comm_dtype fp32)
    assert embedding_grad_bytes(_w("autograd")) == pytest.approx(128256 / 2 * 4096 * 8)
    assert embedding_grad_bytes(_w("fused")) == pytest.approx(128256 / 2 * 4096 * 8)
    assert embedding_grad_bytes(_w("fused", grad_comm_dtype="fp32")) == pytest.approx(128256 / 2 * 4096 * 12)


def test_the_step_is_slower_by_the_accumulation_of_every_micro_batch() -> None:
    c = load_cluster(EX / "ref-64gpu.yaml")
    slow, fast = (plan(workload_from_mapping({
        "model": {"preset": "llama3-8b"}, "training": {"global_batch": 512, "grad_accumulation": acc},
        "parallel": {"tp": 2, "pp": 1, "dp": "auto"}}, "w.yaml"), c) for acc in ("autograd", "fused"))
    assert slow.step_time_s > fast.step_time_s
    assert slow.mfu < fast.mfu


def test_an_unknown_mode_is_rejected_with_its_field() -> None:
    with pytest.raises(SpecError, match="grad_accumulation"):
        _w("deepspeed")


def test_fp32_accumulation_reads_the_new_gradient_and_reads_and_writes_the_fp32_sum() -> None:
    # FSDP2 (reduce_dtype fp32, sync off): unsharded_accumulated_grad += grad: 2 (bf16) + 4 + 4 bytes per weight
    gpu = load_cluster(EX / "ref-64gpu.yaml").gpu
    assert grad_accumulation_s(_w("autograd_fp32"), 1e9, gpu) == pytest.approx(10e9 / gpu.hbm_bw_bytes_s)
    assert grad_accumulation_s(_w("autograd_fp32"), 1e9, gpu) > grad_accumulation_s(_w("autograd"), 1e9, gpu)


def test_fp32_accumulator_is_not_sharded_by_zero2() -> None:
    def grads(acc: str) -> float:
        return memory(workload_from_mapping({
            "model": {"preset": "llama3-8b"}, "training": {"global_batch": 64, "grad_accumulation": acc},
            "parallel": {"tp": 2, "pp": 2, "dp": 4, "zero": 2}}, "w.yaml")).grads_bytes
    # fused: Megatron-Core's main gradient, bf16 as it is reduced in bf16, sharded over dp 4; FSDP2's fp32
    # accumulator holds the whole local gradient: 4 bytes x 4 shards / 2 bytes
    assert grads("autograd_fp32") == pytest.approx(8 * grads("fused"))


def test_fp32_accumulation_adds_the_embedding_gradient_as_megatron_main_grad_does() -> None:
    assert embedding_grad_bytes(_w("autograd_fp32")) == pytest.approx(
        embedding_grad_bytes(_w("fused", grad_comm_dtype="fp32")))
