"""Device work of the input embedding that no GEMM covers: the dense weight gradient of every micro-batch.

Megatron-Core core_r0.10.0 (github.com/NVIDIA/Megatron-LM) tensor_parallel/layers.py VocabParallelEmbedding.forward
looks the tokens up with ``F.embedding`` (or ``self.weight[masked_input]``), whose backward is PyTorch's dense one:
aten/src/ATen/native/cuda/Embedding.cu ``embedding_dense_backward_cuda`` (and the sorted path's
``embedding_backward_cuda_kernel``) allocates ``at::zeros({num_weights, h})`` in the parameters' dtype and adds the
token gradients into it: the whole [V/tp, h] table is written once however few tokens there are. Megatron's DDP
then adds it into the main gradient, a gradient that no fused weight-gradient kernel has already accumulated
(distributed/distributed_data_parallel.py, the backward post-hook: ``param.main_grad.add_(param.grad.data)``
unless ``grad_added_to_main_grad``): the bf16 gradient read, the main gradient (g bytes: fp32 when reduced in fp32,
else bf16) read and written. Per micro-batch on the first pipeline stage, V/tp x h x (e written + the add's bytes,
:func:`~slowlink.workload.compute.added_grad_bytes_per_param`: e read + 2 g). With training.grad_accumulation
autograd the dense gradient is added into .grad in the weights' dtype instead (PyTorch's AccumulateGrad, 3e); with
autograd_fp32 (FSDP2's fp32 accumulator) into fp32 (e + 4 + 4).
The lookup itself and the scatter of the tokens' rows are tokens x h: not counted.
"""

from __future__ import annotations

from slowlink.spec.workload import Workload
from slowlink.workload.compute import added_grad_bytes_per_param
from slowlink.workload.memory import kept_bytes, vocab_shard_params


def embedding_grad_bytes(w: Workload) -> float:
    """HBM bytes of the input embedding's dense weight gradient for one micro-batch (module docstring)."""
    return vocab_shard_params(w) * (kept_bytes(w.training.precision) + added_grad_bytes_per_param(w))
