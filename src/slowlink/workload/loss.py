"""Device work of the loss that the output GEMM does not cover: HBM bytes of the cross-entropy over the logits.

Megatron-Core core_r0.10.0 (github.com/NVIDIA/Megatron-LM) tensor_parallel/cross_entropy.py
VocabParallelCrossEntropy: ``logits.float()``, max, ``-= max``, ``exp``, sum, ``div_`` over the [tokens, V/tp]
logits in fp32; backward ``mul_`` by the loss gradient, then the autograd cast back to the GEMM's dtype
(Megatron's default, cross_entropy_loss_fusion False). With cross_entropy_loss_fusion True, fusions/
fused_cross_entropy.py runs the same steps inside four ``jit_fuser`` functions (core/jit.py: ``torch.compile`` from
torch 2.2 on), one kernel over the logits each, and casts the gradient to bf16 inside the last. Bytes are counted
read + write per pass; the compute model divides them by the GPU's elementwise bandwidth (on the last pipeline
stage).

Aleph Alpha's scaling (github.com/Aleph-Alpha/scaling, public 2024 code; ``training.cross_entropy: gathered``)
does not split the loss over TP: its ``TransformerLMHead`` is a ``ColumnParallelLinear`` with ``parallel_output``
false, whose forward ends in ``all_concat`` (core/nn/linear/utils.py: a list ``torch.distributed.all_gather``, which
ProcessGroupNCCL copies out of a flat buffer into each list tensor, then ``torch.cat``), and
``CrossEntropyLoss.forward`` (transformer/model/losses/cross_entropy.py) runs ``.float()`` on the whole logits,
``torch.nn.functional.cross_entropy`` over the full vocabulary and an ``argmax`` for the accuracy, on every TP rank.
The all-gather of the logits is the TP traffic of :func:`~slowlink.workload.traffic.edge_tp`.
"""

from __future__ import annotations

from slowlink.spec.workload import Workload
from slowlink.units import PRECISION_BYTES
from slowlink.workload.memory import kept_bytes

# A fused loss kernel (apex xentropy / flash-attn's cross_entropy with inplace_backward, as the FlashAttention
# training configs set, github.com/Dao-AILab/flash-attention training/configs/experiment/pile/base.yaml
# loss_fn): the forward reads the logits once, the backward reads them and writes the gradient in place.
FUSED_CE_PASSES = 3.0


def cross_entropy_bytes(w: Workload) -> float:
    """HBM bytes of the loss over the logits, forward + backward, for one micro-batch.

    N = b*s/cp x V/tp logits of e bytes on the last stage, fp32 inside. ``training.cross_entropy``:
      megatron        forward cast e + 4 (skipped when the logits are already fp32), max 4, -= max 8, exp 8,
                      sum 4, div 8; backward mul_ by the loss gradient 8, cast back 4 + e (skipped in fp32)
      megatron_fused  one kernel per compiled function: cast + max e + 4 (4 in fp32: ``.float()`` returns the
                      input), -= max + exp + sum written back 8, div_ 8; backward the in-place mul_ written back
                      and the bf16 gradient 4 + 4 + 2 (fused_cross_entropy.py casts to bf16 whatever the dtype)
      fused           :data:`FUSED_CE_PASSES` passes of e bytes
      gathered        per logit of the whole vocabulary (b*s/cp x V, every TP rank): :func:`gathered_bytes_per_logit`
    """
    m, p, t = w.model, w.parallel, w.training
    n = w.micro_batch_tokens * m.vocab / p.tp
    e = kept_bytes(t.precision)
    f32 = PRECISION_BYTES["fp32"]  # the logits, cast by ``.float()``
    if t.cross_entropy == "gathered":
        return n * p.tp * gathered_bytes_per_logit(e, p.tp)
    if t.cross_entropy == "fused":
        return n * FUSED_CE_PASSES * e
    if t.cross_entropy == "megatron_fused":
        first = f32 if e == f32 else e + f32
        return n * (first + 2.0 * f32 + 2.0 * f32 + 2.0 * f32 + PRECISION_BYTES["bf16"])
    casts = 0.0 if e == f32 else 2.0 * (e + f32)
    return n * (casts + f32 + 2.0 * f32 + 2.0 * f32 + f32 + 2.0 * f32 + 2.0 * f32)


# PyTorch's (log_)softmax over a row too long for shared memory (cunn_SoftMaxForward, aten/src/ATen/native/cuda/
# SoftMax.cu): the row is read for its max, again for the sum of exponentials, again to write the output;
# backward (cunn_SoftMaxBackward) reads the output gradient for its sum, then it and the output to write the input
# gradient.
SOFTMAX_FWD_READS = 3.0
SOFTMAX_BWD_READS = 3.0


def gathered_bytes_per_logit(e: float, tp: int) -> float:
    """HBM bytes per logit of the whole vocabulary, forward + backward, of the ``gathered`` loss (module
    docstring), logits of e bytes: ``.float()`` (e read, 4 written; its backward 4 read, e written; nothing when
    e is 4), log_softmax in fp32 (:data:`SOFTMAX_FWD_READS` reads, one write), the accuracy's ``argmax`` (one
    read), nll_loss's backward zero-filling the log-probability gradient (one write), log_softmax's backward
    (:data:`SOFTMAX_BWD_READS` reads, one write); with tp > 1 the list all-gather's copy-out and ``torch.cat``
    (each e read and written) and, backward, ``all_shard``'s copy of the rank's own slice (1/tp of the logits, read
    and written)."""
    f32 = PRECISION_BYTES["fp32"]
    cast = 0.0 if e == f32 else 2.0 * (e + f32)
    loss = (SOFTMAX_FWD_READS + 1.0) * f32 + f32 + f32 + (SOFTMAX_BWD_READS + 1.0) * f32
    gather = 2.0 * (e + e) + 2.0 * e / tp if tp > 1 else 0.0
    return cast + loss + gather
