"""Gradient and optimizer-state bytes by stack (catalog/data/stacks.yaml grad_buffer_dtype, master_weights,
optimizer_moment_dtype) on Llama 3 8B (8,030,519,296 parameters) on one GPU, worked by hand."""

from __future__ import annotations

import pytest

from slowlink.spec.workload import workload_from_mapping
from slowlink.workload.memory import grad_bytes, memory, optimizer_state_bytes

PARAMS = 8_030_519_296


def _mem(stack: object = None, **training: object) -> tuple[float, float]:
    w = workload_from_mapping({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 8, **training},
                               "parallel": {"tp": 1, "pp": 1, "dp": 1, "zero": 0},
                               **({} if stack is None else {"stack": stack})}, "w.yaml")
    m = memory(w)
    return m.grads_bytes, m.optimizer_bytes


def test_megatron_keeps_its_gradient_buffer_in_the_dtype_it_reduces_in() -> None:
    # distributed_data_parallel.py: grad_dtype = torch.float if grad_reduce_in_fp32 else param.dtype
    assert _mem()[0] == pytest.approx(2 * PARAMS)  # grad_comm_dtype bf16 (the default): bf16 buffer
    assert _mem(grad_comm_dtype="fp32")[0] == pytest.approx(4 * PARAMS)
    assert _mem(grad_comm_dtype="fp8")[0] == pytest.approx(2 * PARAMS)  # cast for the wire, kept in bf16
    assert _mem("nemo")[0] == _mem()[0] and _mem("deepspeed")[0] == _mem()[0]


def test_fsdp_stacks_keep_fp32_gradient_shards() -> None:
    # FSDP1/FSDP2 cast the reduced gradient back to the fp32 sharded parameter's dtype
    assert _mem("torchtitan")[0] == pytest.approx(4 * PARAMS) == _mem("fsdp")[0]
    # autograd's .grad stays in the weights' dtype whatever the stack
    assert _mem("torchtitan", grad_accumulation="autograd")[0] == pytest.approx(2 * PARAMS)


def test_optimizer_state_follows_the_stack_dtypes() -> None:
    assert _mem()[1] == pytest.approx(12 * PARAMS)  # fp32 master + m + v
    assert _mem({"name": "megatron-core", "optimizer_moment_dtype": "bf16"})[1] == pytest.approx(8 * PARAMS)
    assert _mem({"name": "megatron-core", "master_weights": False})[1] == pytest.approx(8 * PARAMS)
    assert optimizer_state_bytes("fp32") == 8.0 and optimizer_state_bytes("bf16") == 12.0


def test_grad_bytes_by_accumulation() -> None:
    w = workload_from_mapping({"model": {"preset": "llama3-8b"},
                               "training": {"global_batch": 8, "grad_accumulation": "autograd_fp32"}}, "w.yaml")
    assert grad_bytes(w) == 4.0
