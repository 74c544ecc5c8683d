"""Classes of compute by op or kernel name: gemm, attention, elementwise (norms, activations, casts, loss),
optimizer and other. ``bench train --profile`` splits a measured step by them (:mod:`slowlink.bench.profile`) and
``read kineto`` splits a GPU trace's computation kernels by them, against the step model's own split.

Each rule is (class, pattern, reason); the first match wins, case-insensitive, on an aten op's or a device
kernel's name; anything issued inside ``torch.optim.Optimizer.step`` is optimizer, whatever its name.
"""

from __future__ import annotations

import re

CLASSES = ("gemm", "attention", "elementwise", "optimizer", "other")
OPTIMIZER_SCOPE = "Optimizer.step#"  # torch/optim/optimizer.py profile_hook_step: f"Optimizer.step#{cls}.step"

RULES: tuple[tuple[str, str, str], ...] = (
    ("optimizer", r"multi_tensor_apply|_foreach_|fused_adam|adamw?\b",
     "PyTorch's foreach and fused optimizer kernels (ATen ForeachFunctors, FusedAdamKernel); only the optimizer "
     "issues them in bench train"),
    ("attention", r"scaled_dot_product|flash|fmha|sdpa|efficient_attention|attention",
     "SDPA's backends: aten::_scaled_dot_product_*, FlashAttention (pytorch_flash::flash_fwd_kernel), "
     "memory-efficient (fmha_cutlassF_*), cuDNN (cudnn_generated_*_sdpa_*); before gemm, as fmha_cutlass* "
     "kernels contain 'cutlass'"),
    ("gemm", r"^aten::(mm|addmm|bmm|baddbmm|addbmm|matmul|linear|_addmm_activation)$",
     "aten's matrix products (a CPU op's self time is its GEMM)"),
    ("gemm", r"gemm|gemv|xmma|cutlass|nvjet|splitkreduce|^Cijk_",
     "cuBLAS/cuBLASLt/CUTLASS kernels: sm90_xmma_gemm_*, ampere_bf16_s16816gemm_*, nvjet_* (Hopper cuBLASLt), "
     "cutlass::Kernel<*>, and cuBLAS's split-K reduction; on ROCm, Tensile's GEMM kernels of rocBLAS/hipBLASLt "
     "(Cijk_Ailk_Bljk_*, named for their index order: C[i,j] = sum over k)"),
    ("other", r"^aten::(view|_unsafe_view|_reshape_alias|reshape|as_strided|t|transpose|permute|slice|select|"
              r"split|split_with_sizes|unbind|chunk|expand|unsqueeze|squeeze|detach|alias|lift_fresh|contiguous|to|"
              r"empty|empty_like|empty_strided|resolve_conj|resolve_neg|result_type|is_nonzero|item|"
              r"_local_scalar_dense)$",
     "views, allocations and dispatch-only ops: no data moved (a copy they cause is its own aten::copy_ or "
     "aten::_to_copy); their self time is dispatcher and allocator overhead"),
    ("elementwise", r"^aten::",
     "every other aten op on a CPU: layer norm, GeLU, adds, autocast's copies (aten::_to_copy), softmax, "
     "embedding, loss; memory bound"),
    ("elementwise", r"at::native|elementwise|norm|softmax|reduce|memcpy|memset|gelu|embedding|nll_loss|"
                    r"cross_entropy|cat|copy|index|fill|bn_fw|bn_bw|nchwToNhwc|nhwcToNchw",
     "PyTorch's native CUDA kernels (vectorized_elementwise_kernel, layer_norm, reduce_kernel, cunn_SoftMax*, "
     "nll_loss*, indexSelect*, CatArrayBatchedCopy), the device's memcpy/memset, and cuDNN's batch norm "
     "(bn_fw_tr_1C11_*, bn_bw_1C11_*) and layout transposes (nchwToNhwcKernel): memory bound"),
)
_COMPILED = tuple((cls, re.compile(pat, re.IGNORECASE)) for cls, pat, _ in RULES)
# Of elementwise, the copies and dtype casts (reported apart, inside elementwise): autocast re-casts every fp32
# weight at each use (aten::_to_copy -> aten::copy_; on CUDA at::native's *_copy_kernel_cuda), traffic a workload
# with bf16 weights does not have; the loss's upcast and memcpys land here too.
COPY = re.compile(r"copy", re.IGNORECASE)



def classify(name: str, in_optimizer: bool = False) -> str:
    """The class of an aten op or device kernel by :data:`RULES`; anything inside Optimizer.step is optimizer."""
    if in_optimizer:
        return "optimizer"
    for cls, pat in _COMPILED:
        if pat.search(name):
            return cls
    return "other"
