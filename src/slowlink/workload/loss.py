"""Device work of the loss that the output GEMM does not cover: HBM bytes of the cross-entropy over the logits.

Megatron-Core core_r0.10.0 (github.com/NVIDIA/Megatron-LM) tensor_parallel/cross_entropy.py
VocabParallelCrossEntropy: ``logits.float()``, max, ``-= max``, ``exp``, sum, ``div_`` over the [tokens, V/tp]
logits in fp32; backward ``mul_`` by the loss gradient, then the autograd cast back to the GEMM's dtype
(Megatron's default, cross_entropy_loss_fusion False). With cross_entropy_loss_fusion True, fusions/
fused_cross_entropy.py runs the same steps inside four ``jit_fuser`` functions (core/jit.py: ``torch.compile`` from
torch 2.2 on), one kernel over the logits each, and casts the gradient to bf16 inside the last. Bytes are counted
read + write per pass; the compute model divides them by the GPU's elementwise bandwidth (on the last pipeline
stage).
"""

from __future__ import annotations

from slowlink.workload.memory import kept_bytes
from slowlink.workload.spec import DTYPE_BYTES, Workload

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
    """
    m, p, t = w.model, w.parallel, w.training
    n = w.micro_batch_tokens * m.vocab / p.tp
    e = kept_bytes(t.precision)
    f32 = DTYPE_BYTES["fp32"]  # the logits, cast by ``.float()``
    if t.cross_entropy == "fused":
        return n * FUSED_CE_PASSES * e
    if t.cross_entropy == "megatron_fused":
        first = f32 if e == f32 else e + f32
        return n * (first + 2.0 * f32 + 2.0 * f32 + 2.0 * f32 + DTYPE_BYTES["bf16"])
    casts = 0.0 if e == f32 else 2.0 * (e + f32)
    return n * (casts + 4.0 + 8.0 + 8.0 + 4.0 + 8.0 + 8.0)
