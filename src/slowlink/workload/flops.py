"""FLOPs of one transformer layer and of the logits, per micro-batch (whole model, before any split).

Per layer forward (Narayanan et al. 2021, Eq. 3; Korthikanti et al. 2022, Sec. 6), with b sequences of s
tokens, hidden h, T = b*s tokens:
  attention projections  2*T*h*(h + 2*h_kv) + 2*T*h*h   (Q, K, V with h_kv = h*kv_heads/heads; output)
                         MLA: 2*T x the elements of its five matrices (``Model.attention_matrices``)
  attention core         2*b*s^2*a*(d_qk + d_v)          (Q K^T and attention x V; MHA d = h/a: 4*b*s^2*h,
                                                          the s/(6h) term; MLA d_qk = nope + rope, d_v)
  MLP                    2*T*h*f*(3 if gated else 2)     (MoE: top_k routed + shared experts, + router;
                                                          averaged over the layers with moe.dense_layers dense)
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
    attn = 2.0 * tokens * sum(out * inp for out, inp, _ in model.attention_matrices())
    mats = 3 if model.gated_mlp else 2
    mlp = 2.0 * tokens * h * model.ffn_hidden * mats
    if model.moe is not None:
        active = model.moe.top_k + model.moe.shared_experts
        moe = 2.0 * tokens * h * model.moe.expert_ffn_hidden * mats * active + 2.0 * tokens * h * model.moe.experts
        dense = model.moe.dense_layers
        mlp = (dense * mlp + (model.layers - dense) * moe) / model.layers
    core = 2.0 * micro_batch * s * s * model.heads * (model.qk_head_dim + model.v_head_dim)
    return LayerFlops(gemm=attn + mlp, attn_core=core)


def logits_forward(model: Model, micro_batch: int) -> float:
    """Forward FLOPs of the output projection: 2*T*h*V."""
    return 2.0 * micro_batch * model.seq_len * model.hidden * model.vocab


def model_flops_per_step(model: Model, global_batch: int) -> float:
    """Model FLOPs of one step (no recomputation): 3 x forward of every layer and the logits."""
    lf = layer_forward(model, global_batch)
    return 3.0 * (model.layers * lf.total + logits_forward(model, global_batch))


def hardware_flops_per_step(model: Model, global_batch: int, recompute: str) -> float:
    """FLOPs the GPUs execute: model FLOPs plus recomputation (full: one more forward of each layer; selective: the
    attention core; op_selective: every second matrix multiply)."""
    lf = layer_forward(model, global_batch)
    if recompute == "op_selective":  # the unsaved matrix multiplies (slowlink.workload.sac)
        from slowlink.workload.sac import recomputed_flops_per_token

        extra = recomputed_flops_per_token(model) * global_batch * model.seq_len
    else:
        extra = {"none": 0.0, "selective": lf.attn_core, "full": lf.total}[recompute]
    return model_flops_per_step(model, global_batch) + model.layers * extra


def params(model: Model) -> tuple[float, float]:
    """(dense parameters, expert parameters): layers' matrices, embeddings and logits (untied).

    Dense: per layer the attention matrices (MLA's latent norms too), 4h of norms, and the MLP: dense layers
    their f-wide MLP, MoE layers their shared experts and the router (h x experts); expert: the routed experts
    of the MoE layers. DeepSeek-V3 (config.json) comes to 671.0e9 (tests/workload/test_mla.py).
    """
    h = model.hidden
    mats = 3 if model.gated_mlp else 2
    attn = sum(out * inp for out, inp, _ in model.attention_matrices()) + model.attention_norm_params
    dense_mlp = float(model.layers * mats * h * model.ffn_hidden)
    expert = 0.0
    if model.moe:
        moe_layers = model.layers - model.moe.dense_layers
        dense_mlp = float(model.moe.dense_layers * mats * h * model.ffn_hidden + moe_layers * (
            mats * h * model.moe.expert_ffn_hidden * model.moe.shared_experts + h * model.moe.experts))
        expert = float(moe_layers * mats * h * model.moe.expert_ffn_hidden * model.moe.experts)
    dense = model.layers * (attn + 4 * h) + dense_mlp + 2.0 * model.vocab * h
    return dense, expert


def active_params(model: Model) -> float:
    """Parameters one token's forward multiplies by: every dense parameter but the input embedding (a lookup),
    and top_k of each MoE layer's routed experts."""
    dense, expert = params(model)
    if model.moe is not None:
        expert *= model.moe.top_k / model.moe.experts
    return dense - model.vocab * model.hidden + expert
