"""FLOPs of one transformer layer and of the logits, per micro-batch (whole model, before any split).

Per layer forward (Narayanan et al. 2021, Eq. 3; Korthikanti et al. 2022, Sec. 6), with b sequences of s
tokens, hidden h, T = b*s tokens:
  attention projections  2*T*h*(h + 2*h_kv) + 2*T*h*h   (Q, K, V with h_kv = h*kv_heads/heads; output)
  attention core         4*b*s^2*h                       (Q K^T and attention x V; the s/(6h) term)
  MLP                    2*T*h*f*(3 if gated else 2)     (MoE: top_k routed + shared experts, + router)
Backward is twice the forward; full recomputation adds one forward, selective one attention core.
For GPT (f = 4h, MHA) the sum is 24*T*h^2 + 4*b*s^2*h, i.e. 72*B*s*l*h^2*(1 + s/(6h)) per step with logits.
"""

from __future__ import annotations

from dataclasses import dataclass

from slowlink.spec.workload import Model


@dataclass(frozen=True)
class LayerFlops:
    """Forward FLOPs of one layer for one micro-batch: GEMMs and the attention core."""

    gemm: float
    attn_core: float

    @property
    def total(self) -> float:
        return self.gemm + self.attn_core


def layer_forward(model: Model, micro_batch: int) -> LayerFlops:
    """Forward FLOPs of one transformer layer on ``micro_batch`` sequences (see module docstring)."""
    h, s = model.hidden, model.seq_len
    tokens = micro_batch * s
    h_kv = h * model.kv_heads // model.heads
    attn = 2.0 * tokens * h * (h + 2 * h_kv) + 2.0 * tokens * h * h
    mats = 3 if model.gated_mlp else 2
    if model.moe is None:
        mlp = 2.0 * tokens * h * model.ffn_hidden * mats
    else:
        active = model.moe.top_k + model.moe.shared_experts
        mlp = 2.0 * tokens * h * model.moe.expert_ffn_hidden * mats * active + 2.0 * tokens * h * model.moe.experts
    core = 4.0 * micro_batch * s * s * h
    return LayerFlops(gemm=attn + mlp, attn_core=core)


def logits_forward(model: Model, micro_batch: int) -> float:
    """Forward FLOPs of the output projection: 2*T*h*V."""
    return 2.0 * micro_batch * model.seq_len * model.hidden * model.vocab


def model_flops_per_step(model: Model, global_batch: int) -> float:
    """Model FLOPs of one step (no recomputation): 3 x forward of every layer and the logits."""
    lf = layer_forward(model, global_batch)
    return 3.0 * (model.layers * lf.total + logits_forward(model, global_batch))


def hardware_flops_per_step(model: Model, global_batch: int, recompute: str) -> float:
    """FLOPs the GPUs execute: model FLOPs plus recomputation (full: one more forward of each layer)."""
    lf = layer_forward(model, global_batch)
    extra = {"none": 0.0, "selective": lf.attn_core, "full": lf.total}[recompute]
    return model_flops_per_step(model, global_batch) + model.layers * extra


def params(model: Model) -> tuple[float, float]:
    """(dense parameters, expert parameters): layers' matrices, embeddings and logits (untied)."""
    h = model.hidden
    h_kv = h * model.kv_heads // model.heads
    mats = 3 if model.gated_mlp else 2
    attn = h * (h + 2 * h_kv) + h * h
    dense_mlp = 0.0 if model.moe else float(mats * h * model.ffn_hidden)
    expert = 0.0
    if model.moe:
        dense_mlp = float(mats * h * model.moe.expert_ffn_hidden * model.moe.shared_experts + h * model.moe.experts)
        expert = float(model.layers * mats * h * model.moe.expert_ffn_hidden * model.moe.experts)
    dense = model.layers * (attn + dense_mlp + 4 * h) + 2.0 * model.vocab * h
    return dense, expert
