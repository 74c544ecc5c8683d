"""The loss's HBM bytes per logit for each cross_entropy variant (loss.py)."""

from __future__ import annotations

import pytest

from slowlink.spec.workload import workload_from_mapping
from slowlink.workload.loss import cross_entropy_bytes


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


def test_gathered_loss_runs_over_the_whole_vocabulary_on_every_tp_rank() -> None:
    """Aleph Alpha's scaling: per logit of the whole vocabulary, .float() 2+4 and back 4+2, log_softmax 3 reads
    + 1 write of 4, argmax 4, nll's zero-filled gradient 4, log_softmax backward 3 reads + 1 write of 4: 52 bytes;
    with TP the list all-gather's copy-out and torch.cat (2+2 each) and the own slice's copy backward (4/tp)."""
    full = 8192 / 2 * 128512  # tokens per CP rank x the whole vocabulary
    assert cross_entropy_bytes(_w("gathered", tp=1)) == pytest.approx(52.0 * full)
    assert cross_entropy_bytes(_w("gathered", tp=4)) == pytest.approx((52.0 + 8.0 + 4.0 / 4) * full)
    # fp32 logits: .float() returns its input
    assert cross_entropy_bytes(_w("gathered", "fp32", tp=1)) == pytest.approx(40.0 * full)
    # not divided by TP: at TP 8 it moves 8x what Megatron's vocab-parallel loss moves per rank, and more
    assert cross_entropy_bytes(_w("gathered", tp=8)) > 8 * cross_entropy_bytes(_w("megatron", tp=8))
