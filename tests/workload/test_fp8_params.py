"""training.fp8_param_gather: FP8 weights in memory and on the wire where the stack does that (catalog/data/
stacks.yaml fp8_param_gather): Megatron-Core's --fp8-param-gather keeps the block's Linear weights in FP8 and its
distributed optimizer all-gathers them in FP8; torchtitan's enable_fsdp_float8_all_gather all-gathers FSDP2 units in
FP8 and keeps fp32 shards. Worked by hand on Llama 3 8B: 32 layers hold 6,979,846,144 parameters (the final norm
spread over them), the embedding and the output layer 2 x 525,336,576."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slowlink.errors import SpecError
from slowlink.spec.cluster import load_cluster
from slowlink.spec.workload import Workload, workload_from_mapping
from slowlink.workload.fp8 import quantize_bytes
from slowlink.workload.memory import gathered_bytes_per_param, memory, weight_bytes
from slowlink.workload.step import plan

LAYERS, ENDS = 6_979_846_144, 2 * 525_336_576
CLUSTER = load_cluster(Path(__file__).resolve().parents[2] / "examples" / "ref-64gpu.yaml")


def _w(stack: str = "megatron-core", zero: int = 1, precision: str = "fp8", **training: Any) -> Workload:
    return workload_from_mapping({"model": {"preset": "llama3-8b"},
                                  "training": {"global_batch": 128, "precision": precision, **training},
                                  "parallel": {"tp": 1, "pp": 1, "dp": 64, "zero": zero}, "stack": stack}, "w.yaml")


def test_megatron_keeps_and_gathers_fp8_linear_weights() -> None:
    on, off = _w(fp8_param_gather=True), _w()
    assert (weight_bytes(on), weight_bytes(off)) == (1.0, 2.0)
    # the vocabulary matrices stay bf16: (6,979,846,144 x 1 + 1,050,673,152 x 2) / 8,030,519,296 = 1.1308
    assert gathered_bytes_per_param(on) == pytest.approx((LAYERS + 2 * ENDS) / (LAYERS + ENDS))
    assert gathered_bytes_per_param(on) == pytest.approx(1.13083, abs=1e-5)
    assert gathered_bytes_per_param(off) == 2.0
    assert memory(on).weights_bytes == pytest.approx(LAYERS + 2 * ENDS)
    assert memory(off).weights_bytes == pytest.approx(2 * (LAYERS + ENDS))
    # an FP8 weight is only transposed: 2 bytes an element, not delayed scaling's 2 + 2 x 1 quantization
    assert quantize_bytes(on, 0, 1, 1) == (2.0, 0.0) and quantize_bytes(off, 0, 1, 1) == (4.0, 0.0)


def test_fp8_gathers_move_fewer_bytes() -> None:
    on = plan(_w(fp8_param_gather=True), CLUSTER, check_memory=False)
    off = plan(_w(), CLUSTER, check_memory=False)
    assert on.comm_total_s["dp"] < off.comm_total_s["dp"]


def test_torchtitan_gathers_fp8_but_keeps_fp32_shards() -> None:
    on, off = _w("torchtitan", 3, fp8_param_gather=True), _w("torchtitan", 3)
    assert (weight_bytes(on), weight_bytes(on, gathered=True)) == (2.0, 1.0)
    assert memory(on).weights_bytes == memory(off).weights_bytes
    assert plan(on, CLUSTER, check_memory=False).comm_total_s["dp"] < plan(off, CLUSTER,
                                                                          check_memory=False).comm_total_s["dp"]


@pytest.mark.parametrize(("stack", "zero", "precision", "message"), [
    ("megatron-core", 1, "bf16", "fp8_param_gather (true) is for precision fp8, not bf16"),
    ("deepspeed", 1, "fp8", "stack deepspeed does not gather FP8 weights"),
    ("megatron-core", 3, "fp8", "needs parallel.zero 1 or 2, not 3"),
    ("torchtitan", 1, "fp8", "FSDP2's all-gather, which needs parallel.zero 3, not 1"),
])
def test_fp8_weights_where_the_stack_has_none_are_refused(stack: str, zero: int, precision: str,
                                                          message: str) -> None:
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _w(stack, zero, precision, fp8_param_gather=True)
