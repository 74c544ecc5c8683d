"""FP8 training as Transformer Engine runs it: which GEMMs run in FP8, and the quantization work each FP8 GEMM adds.

Sources (NVIDIA/TransformerEngine docs/features/low_precision_training, as shared/calibration/kernels.yaml quotes
them, ``te_fp8_*`` entries):
  - a Linear runs three GEMMs (fprop, dgrad, wgrad); its input, weight and output gradient each need a rowwise and a
    columnwise FP8 copy, and on Hopper the columnwise copy is a physical transpose; weights are kept in high
    precision and quantized before each GEMM by default (performance_considerations.rst);
  - delayed scaling takes the scale from a stored amax history: one read of the high-precision tensor per
    quantization (fp8_delayed_scaling); current scaling computes the amax first: "Quantization is a memory-bound
    operation that requires reading the tensor twice", and a tensor gathered across ranks (the input and the
    gradient under sequence parallelism) needs an amax all-reduce before it is quantized (fp8_current_scaling.rst);
  - blockwise scaling (1x128 activations and gradients, 128x128 weights): a 1D-quantized tensor cannot be transposed,
    so its rowwise and columnwise copies are quantized separately from the high-precision source; a 2D-quantized
    weight's columnwise copy is made by transposing data and scales; no scale is synchronized across ranks
    (fp8_blockwise_scaling.rst). MXFP8 (1x32 blocks) quantizes both copies from the source the same way and needs
    Blackwell's block-scaled tensor cores.
Only the Linear layers of the transformer block are TE modules and run in FP8 (QKV, output projection, MLP, the
experts); the attention core (TE's DotProductAttention runs FP8 only with fp8_dpa, off by default), the MoE router
(Megatron-Core's TopKRouter: a torch matmul) and the output layer (Megatron-Core's ColumnParallelLinear, not a TE
module) run in BF16. Scale tensors (one FP32 per 128 or 32 elements) are left out of the bytes: 3% of the FP8
copies at most.
"""

from __future__ import annotations

from slowlink.spec.workload import Fp8Recipe, Workload
from slowlink.units import PRECISION_BYTES

HP_BYTES = PRECISION_BYTES["bf16"]  # the high-precision source of every quantization
FP8_BYTES = PRECISION_BYTES["fp8"]
COPIES = 2.0  # rowwise and columnwise FP8 copies of each quantized tensor
# High-precision reads per quantized tensor: delayed 1 (scale from history, cast and transpose fused); current 2
# (amax pass, then scale and cast); 1D blocks (blockwise activations and gradients, MXFP8) 2, one per copy from
# the source; 2D blocks (blockwise weights) 1, the columnwise copy transposed from the rowwise one (one more FP8
# read).
READS: dict[tuple[Fp8Recipe, str], float] = {
    ("delayed", "activation"): 1.0, ("delayed", "weight"): 1.0,
    ("current", "activation"): 2.0, ("current", "weight"): 2.0,
    ("blockwise", "activation"): 2.0, ("blockwise", "weight"): 1.0,
    ("mxfp8", "activation"): 2.0, ("mxfp8", "weight"): 2.0,
}
TRANSPOSE_READS = {("blockwise", "weight"): 1.0}  # FP8 reads of a transpose made from the rowwise FP8 copy


def linear_precision(w: Workload) -> str:
    """Precision of the transformer block's Linear GEMMs (QKV, projection, MLP, experts): ``training.precision``."""
    return w.training.precision


def other_precision(w: Workload) -> str:
    """Precision of every other GEMM (attention core, router, output layer): BF16 under FP8 (module docstring),
    else ``training.precision``."""
    return "bf16" if w.training.precision == "fp8" else w.training.precision


def quantize_bytes_per_element(recipe: Fp8Recipe, role: str) -> float:
    """HBM bytes one quantization moves per element of a ``role`` tensor (activation, gradient as activation, or
    weight): its high-precision reads (:data:`READS`), the two FP8 copies written, and any FP8 transpose read."""
    return (READS[(recipe, role)] * HP_BYTES + COPIES * FP8_BYTES
            + TRANSPOSE_READS.get((recipe, role), 0.0) * FP8_BYTES)


# An FP8 weight (Megatron-Core's --fp8-param-gather: the parameter is a Transformer Engine Float8Tensor) is not
# quantized again; its columnwise copy is a transpose of the FP8 data: one FP8 read and one FP8 write per element
FP8_WEIGHT_TRANSPOSE = 2.0 * FP8_BYTES


def quantize_bytes(w: Workload, m: float, n: float, k: float) -> tuple[float, float]:
    """(forward, backward) HBM bytes of quantizing one FP8 Linear of ``m`` tokens, ``n`` outputs and ``k`` inputs
    for one micro-batch: forward its input (m x k) and weight (n x k), backward its output gradient (m x n). A
    weight kept in FP8 (training.fp8_param_gather on a stack whose fp8_param_gather is fp8_params) is only
    transposed (:data:`FP8_WEIGHT_TRANSPOSE`)."""
    r = w.training.fp8_recipe
    act, wgt = quantize_bytes_per_element(r, "activation"), quantize_bytes_per_element(r, "weight")
    if w.training.fp8_param_gather and w.stack.fields.fp8_param_gather == "fp8_params":
        wgt = FP8_WEIGHT_TRANSPOSE
    return m * k * act + n * k * wgt, m * n * act


def amax_allreduces(w: Workload) -> tuple[float, float]:
    """(forward, backward) amax all-reduces per layer and micro-batch over the TP group: current scaling with
    sequence parallelism and TP > 1 reduces the amax of each gathered tensor before quantizing it (module docstring):
    the inputs of the QKV and MLP-in GEMMs forward (again under full recomputation), the output gradients of the
    projection and MLP-out GEMMs backward. None otherwise."""
    p, t = w.parallel, w.training
    if t.precision != "fp8" or t.fp8_recipe != "current" or p.tp == 1 or not p.sequence_parallel:
        return 0.0, 0.0
    return (4.0 if t.recompute == "full" else 2.0), 2.0
