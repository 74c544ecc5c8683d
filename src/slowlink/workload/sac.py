"""Op-level selective activation checkpointing as torchtitan runs it (``training.recompute: op_selective``).

torchtitan (``activation_checkpoint.mode: selective``, ``selective_ac_option: op``) wraps each transformer block
in a checkpoint whose policy saves the outputs of the ops in ``_op_sac_save_list`` (models/llama3/infra/
parallelize.py at 018740b7: ``aten.mm``, the SDPA kernels, ``reduce_scatter_tensor``, ``aten.max``) "except every
second mm" (distributed/activation_checkpoint.py ``_custom_policy``: ``meta[mm_count] % 2 == 0`` is recomputed,
the count starting afresh in each block); everything else (norms, RoPE, SiLU, the product, the SP all-gathers) is
recomputed in the backward. The block's input is kept as the checkpoint's input.

A block's matrices in the order torchtitan's Llama block multiplies them: ``wq, wk, wv`` (MHA / GQA, three
matrices where Megatron fuses one; MLA: its matrices as :meth:`~slowlink.spec.workload.Model.attention_matrices`
lists them), ``wo``, then ``w1, w3, w2`` (gated) or ``w1, w2``. MoE blocks are not priced this way (their experts
run grouped GEMMs, which the save list does not name).
"""

from __future__ import annotations

from dataclasses import dataclass

from slowlink.spec.workload import Model

LSE_BYTES = 4.0  # the flash kernel's saved logsumexp: one fp32 per head and token


@dataclass(frozen=True)
class BlockMatmul:
    """One matrix multiply of a block: ``out`` x ``inp`` weights, whether its output columns are split over TP
    (column-parallel) or its input rows (row-parallel: the output is whole, a partial sum), and whether op SAC saves
    its output (odd position in the block's order)."""

    out: int
    inp: int
    column: bool
    saved: bool


def block_matmuls(m: Model) -> list[BlockMatmul]:
    """The block's matrix multiplies in forward order (module docstring), each marked saved or recomputed."""
    h, d = m.hidden, m.qk_head_dim
    if m.mla is None:
        attn = [(m.heads * d, h, True), (m.kv_heads * d, h, True), (m.kv_heads * m.v_head_dim, h, True)]
    else:
        attn = [(o, i, split) for o, i, split in m.attention_matrices()[:-1]]
    attn.append((h, m.attn_out_width, False))
    mlp = ([(m.ffn_hidden, h, True), (m.ffn_hidden, h, True)] if m.gated_mlp else [(m.ffn_hidden, h, True)])
    mats = [*attn, *mlp, (h, m.ffn_hidden, False)]
    return [BlockMatmul(o, i, c, saved=k % 2 == 1) for k, (o, i, c) in enumerate(mats, start=1)]


def out_width(mm: BlockMatmul, tp: int) -> float:
    """Output columns per token on one GPU: split over TP when column-parallel, whole (a partial sum) otherwise."""
    return mm.out / tp if mm.column else float(mm.out)


def saved_bytes_per_token(m: Model, tp: int, sp_split: int, e: float) -> float:
    """Bytes one block keeps per token on one GPU: its input (h / the SP split), the saved matrix outputs, the
    attention output and its logsumexp, and with sequence parallelism the two reduce-scatter outputs."""
    saved = sum(out_width(mm, tp) for mm in block_matmuls(m) if mm.saved)
    rs = 2.0 * m.hidden / sp_split if sp_split > 1 else 0.0
    return e * (m.hidden / sp_split + saved + m.attn_out_width / tp + rs) + LSE_BYTES * m.heads / tp


def recomputed_flops_per_token(m: Model) -> float:
    """Forward FLOPs per token op SAC runs again in the backward: the unsaved matrix multiplies (2 x out x in)."""
    return sum(2.0 * mm.out * mm.inp for mm in block_matmuls(m) if not mm.saved)
