"""The loss's HBM bytes per logit for each cross_entropy variant (loss.py)."""

from __future__ import annotations

import pytest

from slowlink.workload.loss import cross_entropy_bytes
from slowlink.workload.spec import workload_from_mapping


def _w(cross_entropy: str, precision: str = "bf16", tp: int = 4, cp: int = 2):
    return workload_from_mapping({
        "model": {"preset": "llama3-70b", "vocab": 128512},
        "training": {"global_batch": 8, "micro_batch": 1, "precision": precision, "cross_entropy": cross_entropy},
        "parallel": {"tp": tp, "pp": 1, "cp": cp, "dp": 1, "sequence_parallel": True}})


def test_megatron_fused_counts_one_kernel_per_compiled_function() -> None:
    # Megatron-Core core_r0.10.0 fusions/fused_cross_entropy.py: cast+max 2+4, sub/exp/sum written back 4+4,
    # div_ 4+4, backward mul_ written back 4+4 and the bf16 gradient 2: 32 bytes per bf16 logit
    n = 8192 / 2 * 128512 / 4
    assert cross_entropy_bytes(_w("megatron_fused")) == pytest.approx(32.0 * n)
    # fp32 logits: .float() returns its input, so the first function only reads (4), the gradient is still bf16
    assert cross_entropy_bytes(_w("megatron_fused", "fp32")) == pytest.approx(30.0 * n)
    # between the eager path (52) and a single fused kernel (3 passes of 2 bytes)
    assert cross_entropy_bytes(_w("fused")) < cross_entropy_bytes(_w("megatron_fused")) < \
        cross_entropy_bytes(_w("megatron"))


def test_loss_bytes_scale_with_the_local_logits() -> None:
    one = cross_entropy_bytes(_w("megatron_fused", tp=1, cp=1))
    assert cross_entropy_bytes(_w("megatron_fused", tp=4, cp=2)) == pytest.approx(one / 8.0)
