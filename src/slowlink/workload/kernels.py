"""Fixed device cost of short kernels: what a launch-bound op costs on the GPU's stream, whatever its bytes."""

from __future__ import annotations

# Seconds of one short kernel issued back to back from one CPU thread: 3.8 us per kernel (NVIDIA, "Getting
# Started with CUDA Graphs", Gray 2019: a 2.9 us kernel costs 3.8 us in a stream without graphs). Used for the
# per-rank copies of a list-based all_gather/reduce_scatter (zero3) and the router's and dispatcher's small ops
# of a Megatron-Core MoE layer (moe).
SHORT_KERNEL_S = 3.8e-6
