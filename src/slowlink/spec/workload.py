"""The workload spec: model, training, parallelism and overlap, as a user writes it (keys are a contract)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from slowlink.catalog.stack import Stack, StackOverrides, stack
from slowlink.catalog.tp_comm import tp_comm_config
from slowlink.errors import InfeasiblePlan, SpecError
from slowlink.fileio import SPEC_CONFIG, check_kind, read_mapping, source_name, validated
from slowlink.spec.bounds import TOKENS
from slowlink.spec.storage import Checkpoint, CheckpointSpec, Data, DataSpec
from slowlink.units import parse_count

if TYPE_CHECKING:
    from slowlink.spec.cluster import Cluster



# The choices of the schema's fields, shared with the resolved dataclasses below.
Precision = Literal["fp16", "bf16", "fp8", "fp32"]
Recompute = Literal["none", "selective", "full", "op_selective"]
GradDtype = Literal["fp32", "bf16", "fp8"]
CrossEntropy = Literal["megatron", "megatron_fused", "fused", "gathered"]
GradAccumulation = Literal["fused", "autograd", "autograd_fp32"]
Zero3Impl = Literal["fsdp", "deepspeed-2021"]
CpImpl = Literal["ring", "all_gather"]
Zero1GradReduce = Literal["reduce_scatter", "all_reduce"]
AttentionKind = Literal["mha", "mla"]
Fp8Recipe = Literal["delayed", "current", "blockwise", "mxfp8"]
PpSchedule = Literal["1f1b", "zero-bubble", "dualpipe"]

class MoESpec(BaseModel):
    model_config = SPEC_CONFIG
    experts: int = Field(ge=1, description="Routed experts per MoE layer.")
    top_k: int = Field(ge=1, description="Experts each token is routed to.")
    expert_ffn_hidden: int = Field(ge=1, description="Hidden size of one expert's MLP.")
    shared_experts: int = Field(0, ge=0, description="Always-active shared experts (DeepSeek style).")
    dense_layers: int = Field(0, ge=0, description="The first layers whose MLP is dense (model.ffn_hidden), not "
                              "MoE (DeepSeek-V3 config.json first_k_dense_replace: 3).")

    @model_validator(mode="after")
    def _top_k_fits(self) -> MoESpec:
        if self.top_k > self.experts:
            raise ValueError(f"top_k ({self.top_k}) must be <= experts ({self.experts}): a token is routed to "
                             "top_k distinct experts")
        return self


class ModelSpec(BaseModel):
    model_config = SPEC_CONFIG
    preset: str | None = Field(None, description="Name of a bundled model preset; fields given here override it.")
    layers: int | None = Field(None, ge=1, description="Transformer layers.")
    hidden: int | None = Field(None, ge=1, description="Hidden size h.")
    heads: int | None = Field(None, ge=1, description="Attention (query) heads a.")
    kv_heads: int | None = Field(None, ge=1, description="Key/value heads (GQA); = heads for MHA.")
    ffn_hidden: int | None = Field(None, ge=1, description="MLP hidden size (dense layers).")
    vocab: int | None = Field(None, ge=1, description="Vocabulary size V.")
    seq_len: int | None = Field(None, ge=1, description="Sequence length s, tokens.")
    gated_mlp: bool | None = Field(None, description="SwiGLU-style gated MLP (3 matrices instead of 2).")
    dropout: bool | None = Field(None, description="Hidden and attention dropout in training (GPT-3 / Megatron-LM "
                                 "0.1: their 1-byte masks are kept for backward); default true, false in the "
                                 "Llama, Mixtral and DeepSeek presets (none in their reference code).")
    moe: MoESpec | None = Field(None, description="Mixture-of-experts MLP; absent for a dense model.")
    attention: AttentionKind | None = Field(
        None, description="mha = multi-head attention, grouped-query when kv_heads < heads (default); mla = "
        "multi-head latent attention (DeepSeek-V2/V3: low-rank Q and joint KV projections, the fields below).")
    q_lora_rank: int | None = Field(None, ge=0, description="MLA: rank of the query's down-projection; 0 = none "
                                    "(one h x heads*(nope+rope) matrix). DeepSeek-V3: 1536.")
    kv_lora_rank: int | None = Field(None, ge=1, description="MLA: rank of the joint key/value latent. "
                                     "DeepSeek-V3: 512.")
    qk_nope_head_dim: int | None = Field(None, ge=1, description="MLA: per-head query/key width without RoPE. "
                                         "DeepSeek-V3: 128.")
    qk_rope_head_dim: int | None = Field(None, ge=0, description="MLA: per-head query/key width carrying RoPE "
                                         "(the key's part shared by all heads). DeepSeek-V3: 64.")
    v_head_dim: int | None = Field(None, ge=1, description="MLA: per-head value width. DeepSeek-V3: 128.")


class TrainingSpec(BaseModel):
    model_config = SPEC_CONFIG
    global_batch: int = Field(ge=1, description="Sequences per optimizer step.")
    micro_batch: int = Field(1, ge=1, description="Sequences per micro-batch per data-parallel rank.")
    precision: Precision = Field(
        "bf16", description="Precision of the GEMMs; fp32 = no mixed precision (fp32 weights, activations, GEMMs).")
    recompute: Recompute = Field(
        "selective", description="Activation recomputation: none; selective (Megatron: the attention core); full "
        "(every layer from its input); op_selective (torchtitan's op-level selective checkpointing: matrix outputs "
        "but every second one, attention and reduce-scatter outputs kept, the rest recomputed; dense models: "
        "slowlink.workload.sac).")
    grad_comm_dtype: GradDtype = Field("bf16", description="Gradient traffic dtype.")
    flash_attention: bool = Field(
        True, description="Fused (flash) attention: scores never reach HBM, causal blocks skipped; false = "
        "unfused batched GEMMs + softmax (Megatron-LM before 2022).")
    cross_entropy: CrossEntropy = Field(
        "megatron", description="Loss kernel: megatron = Megatron-Core's vocab-parallel cross-entropy (fp32 "
        "logits, several elementwise passes); megatron_fused = the same under cross_entropy_loss_fusion (four "
        "torch.compile'd kernels, fp32 inside, bf16 gradient); fused = one kernel reading the logits forward and "
        "once more backward with an in-place gradient (apex xentropy, flash-attn's); gathered = the logits "
        "all-gathered over TP, cast to fp32 and PyTorch's cross_entropy over the whole vocabulary on every TP "
        "rank (Aleph Alpha's scaling).")
    fused_swiglu: bool = Field(
        True, description="Gated MLP activation in one kernel that keeps the gate and up outputs (Megatron-Core's "
        "bias_swiglu_impl); false = SiLU(gate) * up as two PyTorch ops, which also keep SiLU(gate) and move it "
        "through memory forward and backward (Meta's reference llama, Aleph Alpha's scaling).")
    fused_gate_up: bool = Field(
        True, description="Gated MLP's gate and up projections as one column-parallel linear (Megatron's fc1 of "
        "2 x ffn / tp); false = two linears, each of which, with TP and no SP, all-reduces its own input "
        "gradient in the backward (Aleph Alpha's scaling: ParallelSwiGLUMLP dense_in and siglu_weight).")
    grad_accumulation: GradAccumulation = Field(
        "fused", description="How each micro-batch's weight gradients are summed: fused = in the weight-gradient "
        "GEMM (Megatron's gradient_accumulation_fusion, no extra traffic); autograd = PyTorch's AccumulateGrad "
        "adds the new gradient into .grad in the weights' dtype, one elementwise pass per micro-batch; "
        "autograd_fp32 = the new gradient, in the weights' dtype, is added into an unsharded fp32 buffer by one "
        "elementwise pass (FSDP2 with reduce_dtype fp32 and gradient sync off: unsharded_accumulated_grad).")
    tokens: float | int | str | None = Field(
        None, description="Token budget of the whole run, e.g. 15T or 15e12 (slowlink goodput: time-to-train).")
    fp8_recipe: Fp8Recipe = Field(
        "delayed", description="With precision fp8, Transformer Engine's scaling recipe: delayed (per-tensor scale "
        "from an amax history, TE's default DelayedScaling), current (per-tensor amax of the tensor itself), blockwise "
        "(1x128 / 128x128 blocks, DeepSeek-V3 style) or mxfp8 (1x32 blocks, Blackwell); what each quantization "
        "reads and writes: slowlink.workload.fp8.")

    moe_imbalance: float = Field(
        1.0, ge=1.0, description="MoE without a capacity: the routed tokens the most loaded expert-parallel rank "
        "receives over the mean (1.0: perfectly balanced). Every rank waits for it in the all-to-all, and its expert "
        "GEMMs run that much longer (slowlink.workload.moe.expert_load).")
    moe_capacity_factor: float | None = Field(
        None, gt=0, description="MoE: Megatron-Core's moe_expert_capacity_factor, an expert's tokens at most this x "
        "the mean, the rest dropped; none = dropless (Megatron-Core's default).")
    moe_pad_to_capacity: bool = Field(
        False, description="MoE: every expert's input padded to its capacity (Megatron-Core's "
        "moe_pad_expert_input_to_capacity; needs moe_capacity_factor).")

    fp8_param_gather: bool = Field(
        False, description="With precision fp8, the stack's FP8 weights (its fp8_param_gather, catalog/data/"
        "stacks.yaml): Megatron-Core's --fp8-param-gather keeps the block's Linear weights in FP8 and the distributed "
        "optimizer all-gathers them in FP8 (ZeRO 1/2); torchtitan's enable_fsdp_float8_all_gather all-gathers the "
        "FSDP2 units in FP8 (ZeRO 3).")

    @model_validator(mode="after")
    def _fp8_weights_need_fp8(self) -> TrainingSpec:
        if self.fp8_param_gather and self.precision != "fp8":
            raise ValueError(f"fp8_param_gather (true) is for precision fp8, not {self.precision}: only FP8 Linear "
                             "layers have FP8 weights")
        return self

    @model_validator(mode="after")
    def _padding_needs_a_capacity(self) -> TrainingSpec:
        if self.moe_pad_to_capacity and self.moe_capacity_factor is None:
            raise ValueError("moe_pad_to_capacity (true) needs moe_capacity_factor: there is no capacity to pad to "
                             "(Megatron-Core's transformer_config.py asserts the same)")
        return self

    @model_validator(mode="after")
    def _recipe_needs_fp8(self) -> TrainingSpec:
        if "fp8_recipe" in self.model_fields_set and self.precision != "fp8":
            raise ValueError(f"fp8_recipe ({self.fp8_recipe}) is for precision fp8, not {self.precision}: only FP8 "
                             "GEMMs quantize")
        return self

    @field_validator("tokens")
    @classmethod
    def _tokens_count(cls, v: float | int | str | None) -> float | None:
        return None if v is None else TOKENS.check(parse_count(v))


# parallel.dp written as `auto`: resolved against a cluster by workload.step.fit_dp before any planning.
AUTO_DP = 0


class ParallelSpec(BaseModel):
    model_config = SPEC_CONFIG
    tp: int = Field(1, ge=1, description="Tensor-parallel size.")
    pp: int = Field(1, ge=1, description="Pipeline stages.")
    dp: int = Field(1, ge=0, description="Data-parallel size; `auto` (held as 0) = the cluster's GPUs / "
                    "(tp x pp x cp), so one workload file plans on clusters of different sizes.")
    cp: int = Field(1, ge=1, description="Context-parallel size (ring attention).")
    ep: int = Field(1, ge=1, description="Expert-parallel size (inside the data-parallel group).")
    vp: int = Field(1, ge=1, description="Virtual stages per pipeline rank (interleaved 1F1B when > 1).")
    zero: int = Field(1, ge=0, le=3, description="ZeRO stage: 0 none, 1 optimizer, 2 +grads, 3 +params (FSDP).")
    sequence_parallel: bool = Field(True, description="Megatron sequence parallelism with TP.")
    pp_scatter_gather: bool = Field(
        True, description="Without SP, each TP rank sends 1/tp of a stage's output to the next stage, which "
        "all-gathers it over TP (Megatron's scatter_gather_tensors_in_pipeline; Narayanan et al. 2021 Sec. 4.1); "
        "false = every TP rank sends the whole tensor (Aleph Alpha's scaling PipeCommunicator).")
    zero3_impl: Zero3Impl = Field(
        "fsdp", description="ZeRO-3 implementation: fsdp = one gather per layer, prefetched (PyTorch FSDP, "
        "DeepSpeed >= 0.5); deepspeed-2021 = one gather per tensor, device-synchronized, list API (DeepSpeed "
        "<= 0.4.0, before PR #1188).")
    cp_impl: CpImpl = Field(
        "ring", description="Context parallelism: ring = K/V passed round the ring, each hop hidden behind a block "
        "of attention (Liu et al. 2023; Megatron-LM); all_gather = K/V all-gathered before attention and dK/dV "
        "reduce-scattered after it, exposed (Meta's Llama 3, Dubey et al. 2024 Sec. 3.3.2).")
    zero1_grad_reduce: Zero1GradReduce = Field(
        "reduce_scatter", description="How ZeRO-1 reduces the gradients before each rank updates its optimizer "
        "shard: reduce_scatter (Megatron-LM distributed optimizer, DeepSpeed stage 1) or all_reduce (every rank "
        "gets the full gradient: Aleph Alpha's scaling, core/optimizer/optimizer.py allreduce_gradients).")
    order: str = Field(
        "tp-cp-dp-pp", description="Rank order, fastest-varying dimension first: a permutation of tp, cp, dp, pp "
        "joined by '-'. Megatron-LM: tp-cp-dp-pp (default); Meta's Llama 3: tp-cp-pp-dp (DP outermost).")
    pp_schedule: PpSchedule = Field(
        "1f1b", description="Pipeline schedule: 1f1b (Megatron-Core's 1F1B, interleaved when vp > 1), zero-bubble "
        "(ZB-H1: weight gradients deferred into the bubble, Qi et al. 2023) or dualpipe (DeepSeek-V3's bidirectional "
        "schedule, two stages a rank); the stack must implement it (slowlink.workload.schedule.bubble_ratio).")
    first_stage_layers: int | None = Field(None, ge=0, description="Layers on the first pipeline stage.")
    last_stage_layers: int | None = Field(None, ge=0, description="Layers on the last pipeline stage.")


    @field_validator("dp", mode="before")
    @classmethod
    def _dp_auto(cls, v: object) -> object:
        if v == "auto":
            return AUTO_DP
        if v == AUTO_DP:
            raise ValueError("dp (0) must be >= 1, or auto")
        return v

    @field_validator("order")
    @classmethod
    def _order_is_a_permutation(cls, v: str) -> str:
        if sorted(v.split("-")) != ["cp", "dp", "pp", "tp"]:
            raise ValueError(f"order ({v!r}) must name tp, cp, dp and pp once each, joined by '-'")
        return v

    @model_validator(mode="after")
    def _all_reduce_only_under_zero1(self) -> ParallelSpec:
        if self.zero1_grad_reduce == "all_reduce" and self.zero != 1:
            raise ValueError(f"zero1_grad_reduce (all_reduce) needs zero 1, not {self.zero}: ZeRO 0 always "
                             "all-reduces, ZeRO 2 and 3 shard the gradients (reduce-scatter)")
        return self

    @model_validator(mode="after")
    def _schedule_fits_the_layout(self) -> ParallelSpec:
        if self.pp_schedule == "1f1b":
            return self
        if self.pp < 2 or self.vp > 1:
            raise ValueError(f"pp_schedule ({self.pp_schedule}) needs pp > 1 (not {self.pp}) and vp 1 (not "
                             f"{self.vp}): its bubble is priced for one chunk a stage")
        if self.pp_schedule == "dualpipe" and self.pp % 2:
            raise ValueError(f"pp_schedule (dualpipe) needs an even pp, not {self.pp}: DualPipe 'requires that the "
                             "pipeline stages and micro-batches be divisible by 2' (DeepSeek-V3, Sec. 3.2.1)")
        return self

    @model_validator(mode="after")
    def _interleaving_needs_stages(self) -> ParallelSpec:
        # Virtual stages interleave a rank's layer chunks with other ranks' (Narayanan et al. 2021, 2.2.2):
        # with one stage there is nothing to interleave (Megatron-LM validate_args refuses
        # --num-layers-per-virtual-pipeline-stage without pipeline parallelism).
        if self.vp > 1 and self.pp == 1:
            raise ValueError(f"vp ({self.vp}) > 1 needs pp > 1: interleaving splits layers between pipeline stages")
        return self


class OverlapSpec(BaseModel):
    model_config = SPEC_CONFIG
    grad_reduce: bool = Field(True, description="Overlap the DP gradient reduction with the backward pass.")
    param_gather: bool = Field(True, description="Overlap the ZeRO parameter all-gather with the forward pass.")
    tp_comm: bool = Field(False, description="Overlap TP collectives with GEMMs (userbuffers / async TP).")
    tp_comm_config: str = Field("te-v1.13-default", description="With tp_comm: the userbuffers config (per GEMM "
                                "method, SMs, chunks), a name in catalog/data/tp_comm_configs.yaml.")
    pp_comm: bool = Field(False, description="Overlap the PP send/recv with the next model chunk's compute "
                          "(Megatron's overlap_p2p_comm with batch_p2p_comm false; interleaved schedule only, "
                          "parallel.vp > 1); false = each hand-off waited for (Megatron's default).")
    defer_embedding_wgrad: bool = Field(
        False, description="Megatron-Core's defer_embedding_wgrad_compute: the output layer's weight-gradient GEMM of "
        "every micro-batch runs after the last stage's final backward, in its pipeline-drain idle time, not in each "
        "micro-batch (needs parallel.pp > 1 and training.grad_accumulation fused).")
    wgrad_deferral_limit: int = Field(
        0, ge=0, description="With defer_embedding_wgrad: how many micro-batches' output-layer weight gradients are "
        "deferred, the first ones; the rest are computed at once (Megatron-Core's wgrad_deferral_limit; 0 = all).")
    ep_comm: bool = Field(
        False, description="Batch-level MoE overlap: one micro-batch's token dispatch and combine (EP all-to-all, its "
        "TP gathers) run beside another micro-batch's layer compute, forward of one beside backward of the other "
        "(DeepSeek-V3 DualPipe, arXiv 2412.19437 Sec. 3.2.1; Megatron-Core >= v0.14 "
        "--overlap-moe-expert-parallel-comm); needs a MoE model and two or more micro-batches per step.")


# The choices of the sync: section (docs/sites.md), shared with the resolved Sync below.
SyncMethod = Literal["ddp", "hierarchical", "diloco", "streaming-diloco"]
Crossing = Literal["dp", "pp"]
OuterDtype = Literal["fp32", "bf16", "fp8", "int8", "fp4"]


class SyncSpec(BaseModel):
    """How data-parallel replicas in different sites agree (docs/sites.md); read only on a cluster with sites."""

    model_config = SPEC_CONFIG
    method: SyncMethod = Field(
        "ddp", description="ddp = one flat all-reduce of the gradients every step; hierarchical = reduce-scatter "
        "inside each site, all-reduce across, all-gather inside, every step; diloco = each site trains inner_steps "
        "steps alone, then the sites all-reduce the pseudo-gradient (Douillard et al. 2023); streaming-diloco = the "
        "same, one fragment of the model at a time, overlapped with inner steps (Douillard et al. 2025).")
    inner_steps: int | None = Field(None, ge=1, description="DiLoCo's H: steps between two syncs of the same "
                                    "parameters (required for diloco and streaming-diloco).")
    outer_optimizer: Literal["nesterov", "sgd"] = Field(
        "nesterov", description="Optimizer of the pseudo-gradient: nesterov (DiLoCo's, lr 0.7, momentum 0.9) or sgd.")
    outer_dtype: OuterDtype = Field("fp32", description="Element type the pseudo-gradient crosses the sites in "
                                    "(INTELLECT-1: int8; Streaming DiLoCo: 4-bit floats).")
    fragments: int = Field(1, ge=1, description="streaming-diloco: fragments of the model, each synced once per "
                           "inner_steps, in turn.")
    overlap_steps: int = Field(0, ge=0, description="streaming-diloco: inner steps a fragment's sync runs beside "
                               "before the fragment is needed (the paper's tau).")
    crosses: Crossing = Field("dp", description="The dimension that spans the sites: dp (each site holds whole "
                              "model replicas; the sync crosses) or pp (each site holds pp / sites consecutive "
                              "stages of every replica; activations cross once per micro-batch, DP stays inside).")

    @model_validator(mode="after")
    def _method_keys(self) -> SyncSpec:
        local = self.method in ("diloco", "streaming-diloco")
        if local and self.inner_steps is None:
            raise ValueError(f"sync.inner_steps: required for method {self.method} (DiLoCo's H, e.g. 500; "
                             "INTELLECT-1 used 100)")
        if not local:
            given = [k for k in ("inner_steps", "outer_optimizer", "outer_dtype", "fragments", "overlap_steps")
                     if k in self.model_fields_set]
            if given:
                raise ValueError(f"sync.{given[0]}: only for diloco and streaming-diloco, not method "
                                 f"{self.method} (which syncs every step in training.grad_comm_dtype)")
        if self.method != "streaming-diloco":
            for key in ("fragments", "overlap_steps"):
                if key in self.model_fields_set and local:
                    raise ValueError(f"sync.{key} ({getattr(self, key)}): only for streaming-diloco, not "
                                     f"method {self.method}")
        h = self.inner_steps or 1
        if self.fragments > h:
            raise ValueError(f"sync.fragments ({self.fragments}) must be <= inner_steps ({h}): each fragment syncs "
                             "once per inner_steps, at a step of its own")
        if self.crosses == "pp" and self.method != "ddp":
            raise ValueError(f"sync.crosses (pp) with method {self.method}: pipeline stages across sites keep every "
                             "data-parallel group inside a site, so nothing syncs across: use method ddp (the default)")
        if self.overlap_steps >= h:
            raise ValueError(f"sync.overlap_steps ({self.overlap_steps}) must be < inner_steps ({h}): a fragment's "
                             "sync must land before its next one starts")
        return self


class WorkloadSpec(BaseModel):
    """The workload file, exactly as written."""

    model_config = SPEC_CONFIG
    name: str | None = Field(None, description="Name shown in reports.")
    model: ModelSpec = Field(description="The model: a preset and/or its fields.")
    training: TrainingSpec = Field(description="Batch, precision, recomputation.")
    parallel: ParallelSpec = Field(default_factory=ParallelSpec, description="Parallel layout.")
    overlap: OverlapSpec = Field(default_factory=OverlapSpec, description="What overlaps with compute.")
    data: DataSpec | None = Field(None, description="Training data: sample size, layout, readers (docs/storage.md).")
    checkpoint: CheckpointSpec | None = Field(None, description="Checkpoints: interval, sync/async, contents.")
    sync: SyncSpec | None = Field(None, description="How replicas in different sites sync (docs/sites.md); read "
                                  "only on a cluster with sites: (absent there: ddp).")
    stack: StackOverrides | None = Field(
        None, description="The training stack: a name in catalog/data/stacks.yaml (megatron-core, the default; nemo, "
        "torchtitan, deepspeed, fsdp), or {name: ..., <field>: ...} to override its fields (docs/stacks.md).")

    @field_validator("stack", mode="before")
    @classmethod
    def _stack_by_name(cls, v: object) -> object:
        return {"name": v} if isinstance(v, str) else v


@dataclass(frozen=True)
class Moe:
    experts: int
    top_k: int
    expert_ffn_hidden: int
    shared_experts: int
    dense_layers: int = 0


@dataclass(frozen=True)
class Mla:
    """Multi-head latent attention's widths (DeepSeek-V2 Sec. 2.1; DeepSeek-V3 Sec. 2.1.1, config.json)."""

    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True)
class Model:
    """A resolved model: every field known."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn_hidden: int
    vocab: int
    seq_len: int
    gated_mlp: bool
    moe: Moe | None
    dropout: bool = True
    mla: Mla | None = None

    @property
    def qk_head_dim(self) -> int:
        """Per-head width of a query and a key: h/heads, or under MLA nope + rope."""
        return self.hidden // self.heads if self.mla is None else self.mla.qk_nope_head_dim + self.mla.qk_rope_head_dim

    @property
    def v_head_dim(self) -> int:
        """Per-head width of a value (and of the attention output): h/heads, or MLA's v_head_dim."""
        return self.hidden // self.heads if self.mla is None else self.mla.v_head_dim

    @property
    def k_width(self) -> int:
        """Key columns per token the attention core reads: kv_heads x d; MLA decompresses a key for every head."""
        return (self.kv_heads if self.mla is None else self.heads) * self.qk_head_dim

    @property
    def v_width(self) -> int:
        """Value columns per token the attention core reads (kv_heads x d; MLA: heads x v_head_dim)."""
        return (self.kv_heads if self.mla is None else self.heads) * self.v_head_dim

    @property
    def attn_out_width(self) -> int:
        """Columns of the attention output, the output projection's input: heads x v_head_dim (h for MHA)."""
        return self.heads * self.v_head_dim

    def attention_matrices(self) -> tuple[tuple[int, int, bool], ...]:
        """(out, in, split by TP) of each attention weight matrix, in forward order.

        MHA/GQA (Megatron): fused QKV h x (h + 2 h_kv), column-parallel; output projection h x h, row-parallel.
        MLA (DeepSeek-V3 inference/model.py ``MLA``: wq_a and wkv_a plain ``Linear``, wq_b and wkv_b
        ``ColumnParallelLinear``, wo ``RowParallelLinear``): q down h -> q_lora, q up q_lora -> heads (nope +
        rope), kv down h -> kv_lora + rope (the shared RoPE key), kv up kv_lora -> heads (nope + v), output
        heads v -> h. With q_lora_rank 0 the query is one h -> heads (nope + rope) matrix.
        """
        h = self.hidden
        if self.mla is None:
            return ((h + 2 * self.kv_heads * (h // self.heads), h, True), (h, h, True))
        a, q = self.mla, self.heads * self.qk_head_dim
        query = ((a.q_lora_rank, h, False), (q, a.q_lora_rank, True)) if a.q_lora_rank else ((q, h, True),)
        return (*query, (a.kv_lora_rank + a.qk_rope_head_dim, h, False),
                (self.heads * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank, True),
                (h, self.attn_out_width, True))

    @property
    def attention_norm_params(self) -> int:
        """MLA's RMSNorms on its latents (q_a_layernorm, kv_a_layernorm): q_lora + kv_lora weights; else 0."""
        return 0 if self.mla is None else self.mla.q_lora_rank + self.mla.kv_lora_rank


@dataclass(frozen=True)
class Training:
    """How the workload trains, resolved (every field as :class:`TrainingSpec` documents it; ``tokens`` parsed)."""

    global_batch: int
    micro_batch: int
    precision: Precision
    recompute: Recompute
    grad_comm_dtype: GradDtype
    flash_attention: bool
    cross_entropy: CrossEntropy
    fused_swiglu: bool
    fused_gate_up: bool
    grad_accumulation: GradAccumulation
    tokens: float | None
    fp8_recipe: Fp8Recipe = "delayed"
    moe_imbalance: float = 1.0
    moe_capacity_factor: float | None = None
    moe_pad_to_capacity: bool = False
    fp8_param_gather: bool = False


@dataclass(frozen=True)
class Parallel:
    """The parallel layout, resolved (every field as :class:`ParallelSpec` documents it), with the sizes derived
    from its degrees, one rule each, as torchtitan's ParallelDims carries them. ``dp`` is :data:`AUTO_DP` until
    resolved on a cluster (:meth:`on_gpus`)."""

    tp: int
    pp: int
    dp: int
    cp: int
    ep: int
    vp: int
    zero: int
    sequence_parallel: bool
    pp_scatter_gather: bool
    zero3_impl: Zero3Impl
    cp_impl: CpImpl
    zero1_grad_reduce: Zero1GradReduce
    order: str
    first_stage_layers: int | None
    last_stage_layers: int | None
    pp_schedule: PpSchedule = "1f1b"

    @classmethod
    def of(cls, **given: Any) -> Parallel:
        """A layout written in code: validated as a file's ``parallel:`` section, with its defaults."""
        return cls(**ParallelSpec(**given).model_dump())

    @property
    def resolved(self) -> bool:
        """Whether ``dp`` is a number (``auto`` is resolved against a cluster: :meth:`on_gpus`)."""
        return self.dp != AUTO_DP

    @property
    def model_parallel(self) -> int:
        """GPUs holding one replica of the model: ``tp x pp x cp``."""
        return self.tp * self.pp * self.cp

    @property
    def world_size(self) -> int:
        """GPUs of the job: ``tp x pp x dp x cp`` (dp resolved)."""
        return self.model_parallel * self._dp()

    @property
    def dp_shards(self) -> int:
        """Ranks that hold the same model slice and shard its optimizer state (ZeRO >= 1), gradients (>= 2) and
        weights (3): ``dp x cp``, as Megatron-Core's distributed optimizer shards over the data-parallel group
        with context parallelism."""
        return self._dp() * self.cp

    def _dp(self) -> int:
        if not self.resolved:
            raise SpecError("parallel.dp (auto) is not resolved: resolve the layout on a cluster's GPUs first "
                            "(Parallel.on_gpus)")
        return self.dp

    def on_gpus(self, gpus: int) -> Parallel:
        """This layout with ``dp: auto`` resolved on ``gpus`` GPUs: ``gpus / (tp x pp x cp)``."""
        if self.resolved:
            return self
        if gpus % self.model_parallel:
            raise InfeasiblePlan(f"parallel.dp (auto): tp ({self.tp}) * pp ({self.pp}) * cp ({self.cp}) = "
                                 f"{self.model_parallel} must divide the cluster's gpus ({gpus})",
                                 rule="parallel_divides")
        return replace(self, dp=gpus // self.model_parallel)



@dataclass(frozen=True)
class Overlap:
    """What overlaps with compute, resolved (every field as :class:`OverlapSpec` documents it)."""

    grad_reduce: bool
    param_gather: bool
    tp_comm: bool
    tp_comm_config: str
    pp_comm: bool
    defer_embedding_wgrad: bool
    wgrad_deferral_limit: int
    ep_comm: bool = False


@dataclass(frozen=True)
class Sync:
    """How replicas in different sites sync, resolved (fields as :class:`SyncSpec` documents them; ``inner_steps``
    is 1 for ddp and hierarchical)."""

    method: SyncMethod = "ddp"
    inner_steps: int = 1
    outer_optimizer: Literal["nesterov", "sgd"] = "nesterov"
    outer_dtype: OuterDtype = "fp32"
    fragments: int = 1
    overlap_steps: int = 0
    crosses: Crossing = "dp"

    @classmethod
    def of(cls, spec: SyncSpec) -> Sync:
        return cls(spec.method, spec.inner_steps or 1, spec.outer_optimizer, spec.outer_dtype, spec.fragments,
                   spec.overlap_steps, spec.crosses)


@dataclass(frozen=True)
class Workload:
    name: str
    model: Model
    training: Training
    parallel: Parallel
    overlap: Overlap
    data: Data | None = None  # the storage model's sections (slowlink.spec.storage)
    checkpoint: Checkpoint | None = None
    sync: Sync | None = None  # how replicas in different sites sync (read only on a cluster with sites)
    stack: Stack = dataclasses.field(default_factory=stack)  # catalog/data/stacks.yaml, overrides applied

    @property
    def micro_batch_tokens(self) -> float:
        """Tokens of one micro-batch on one GPU before any TP split: b*s/cp."""
        return self.training.micro_batch * self.model.seq_len / self.parallel.cp

    @property
    def tokens_per_step(self) -> int:
        """Tokens one optimizer step trains on: global_batch x seq_len."""
        return self.training.global_batch * self.model.seq_len

    @property
    def micro_batches(self) -> int:
        """Micro-batches each data-parallel rank runs per step: global_batch / (micro_batch x dp)."""
        return self.training.global_batch // (self.training.micro_batch * self.parallel.dp)

    @property
    def sp_split(self) -> int:
        """What sequence parallelism divides the tensors TP would replicate by: tp under SP, else 1."""
        p = self.parallel
        return p.tp if p.sequence_parallel and p.tp > 1 else 1


_MODEL_FIELDS = ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab", "seq_len", "gated_mlp")


def resolve_model(spec: ModelSpec) -> Model:
    """Merge a preset with the fields given; every field must end up known."""
    from slowlink.catalog.models import preset

    base: dict[str, Any] = preset(spec.preset) if spec.preset else {}
    given = spec.model_dump(exclude_none=True, exclude={"preset"})
    merged = {**base, **given}
    missing = [f for f in _MODEL_FIELDS if f not in merged and f != "kv_heads"]
    if missing:
        raise SpecError(f"model: {', '.join(missing)} missing: give a preset or every field")
    moe = merged.get("moe")
    m = Moe(**{"shared_experts": 0, **moe}) if moe else None
    if m is not None and m.top_k > m.experts:
        raise SpecError(f"model.moe.top_k ({m.top_k}) must be <= model.moe.experts ({m.experts})")
    if merged["hidden"] % merged["heads"]:
        raise SpecError(f"model.hidden ({merged['hidden']}) must be divisible by model.heads ({merged['heads']})")
    kv = merged.get("kv_heads", merged["heads"])
    if merged["heads"] % kv:
        raise SpecError(f"model.kv_heads ({kv}) must divide model.heads ({merged['heads']})")
    if m is not None and m.dense_layers >= merged["layers"]:
        raise SpecError(f"model.moe.dense_layers ({m.dense_layers}) must be < model.layers ({merged['layers']})")
    return Model(name=spec.preset or "custom", layers=merged["layers"], hidden=merged["hidden"],
                 heads=merged["heads"], kv_heads=kv, ffn_hidden=merged["ffn_hidden"], vocab=merged["vocab"],
                 seq_len=merged["seq_len"], gated_mlp=bool(merged["gated_mlp"]), moe=m,
                 dropout=bool(merged.get("dropout", True)), mla=_resolve_mla(merged))


_MLA_FIELDS = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")


def _resolve_mla(merged: dict[str, Any]) -> Mla | None:
    """MLA's widths when ``attention: mla``: every field given; they are refused under mha."""
    given = [f for f in _MLA_FIELDS if merged.get(f) is not None]
    if merged.get("attention", "mha") != "mla":
        if given:
            raise SpecError(f"model: {', '.join(given)} need attention mla, not {merged.get('attention', 'mha')}")
        return None
    missing = [f for f in _MLA_FIELDS if merged.get(f) is None]
    if missing:
        raise SpecError(f"model: attention mla needs {', '.join(missing)}")
    if merged.get("kv_heads", merged["heads"]) != merged["heads"]:
        raise SpecError(f"model.kv_heads ({merged['kv_heads']}) must equal model.heads ({merged['heads']}) under "
                        "attention mla: every head decompresses its own key and value from the latent")
    return Mla(**{f: int(merged[f]) for f in _MLA_FIELDS})


def check_context_parallel(model: Model, parallel: ParallelSpec) -> None:
    """Context parallelism splits each sequence into ``2 cp`` chunks, rank i holding chunks i and 2cp-1-i so
    that causal attention work is balanced (Megatron-LM ``get_batch_on_this_cp_rank`` in
    megatron/training/utils.py): the sequence length must be a multiple of ``2 cp``."""
    cp = parallel.cp
    if cp > 1 and model.seq_len % (2 * cp):
        raise SpecError(f"parallel.cp ({cp}): model.seq_len ({model.seq_len}) must be a multiple of 2 * cp "
                        f"({2 * cp}), the chunks context parallelism splits a sequence into")


def check_pipeline_overlap(spec: WorkloadSpec) -> None:
    """What Megatron-Core core_r0.10.0 refuses: overlapped PP send/recv outside the interleaved schedule
    (pipeline_parallel/schedules.py, forward_backward_pipelining_without_interleaving raises), deferred embedding
    weight gradients without pipeline parallelism or without gradient-accumulation fusion (model_parallel_config.py,
    ``__post_init__``)."""
    o, p = spec.overlap, spec.parallel
    if o.pp_comm and p.vp < 2:
        raise SpecError(f"overlap.pp_comm (true): needs the interleaved schedule, parallel.vp ({p.vp}) > 1")
    if o.defer_embedding_wgrad and p.pp < 2:
        raise SpecError(f"overlap.defer_embedding_wgrad (true): needs a pipeline, parallel.pp ({p.pp}) > 1")
    if o.defer_embedding_wgrad and spec.training.grad_accumulation != "fused":
        raise SpecError(f"overlap.defer_embedding_wgrad (true): needs training.grad_accumulation fused, not "
                        f"{spec.training.grad_accumulation!r}")


def check_stack_schedule(st: Stack, parallel: ParallelSpec) -> None:
    """The pipeline schedule the layout needs must be one the stack implements: 1F1B for pp > 1, the interleaved
    one for vp > 1 (each stack's ``pipeline_schedules``, with its source, in catalog/data/stacks.yaml)."""
    have = st.fields.pipeline_schedules
    if parallel.vp > 1 and "interleaved" not in have:
        raise SpecError(f"parallel.vp ({parallel.vp}) > 1 needs the interleaved pipeline schedule; stack {st.name} "
                        f"implements {', '.join(have) or 'none'} ({dict(st.sources)['pipeline_schedules']})")
    if parallel.pp > 1 and not have:
        raise SpecError(f"parallel.pp ({parallel.pp}) > 1 needs a pipeline schedule; stack {st.name} implements "
                        f"none ({dict(st.sources)['pipeline_schedules']})")
    if parallel.pp_schedule != "1f1b" and parallel.pp_schedule not in have:
        raise SpecError(f"parallel.pp_schedule ({parallel.pp_schedule}): stack {st.name} implements "
                        f"{', '.join(have) or 'none'} ({dict(st.sources)['pipeline_schedules']})")


# The GPU architectures each FP8 recipe runs on (Transformer Engine docs: MXFP8 needs Blackwell's block-scaled
# tensor cores; blockwise scaling is emulated in software on Hopper, fp8_blockwise_scaling.rst).
RECIPE_ARCHS: dict[str, tuple[str, ...]] = {"delayed": ("hopper", "ada", "blackwell"),
                                            "current": ("hopper", "ada", "blackwell"),
                                            "blockwise": ("hopper", "blackwell"), "mxfp8": ("blackwell",)}


def check_fp8_params(st: Stack, spec: WorkloadSpec) -> None:
    """training.fp8_param_gather needs a stack that gathers FP8 weights, at the ZeRO stage it does so in: the
    distributed optimizer's gather (ZeRO 1/2) for fp8_params, FSDP2's (ZeRO 3) for fsdp_all_gather."""
    if not spec.training.fp8_param_gather:
        return
    kind, zero = st.fields.fp8_param_gather, spec.parallel.zero
    if kind == "none":
        raise SpecError(f"training.fp8_param_gather (true): stack {st.name} does not gather FP8 weights "
                        "(its fp8_param_gather is none, catalog/data/stacks.yaml)")
    if kind == "fp8_params" and zero not in (1, 2):
        raise SpecError(f"training.fp8_param_gather (true): stack {st.name} gathers FP8 weights in its distributed "
                        f"optimizer, which needs parallel.zero 1 or 2, not {zero}")
    if kind == "fsdp_all_gather" and zero != 3:
        raise SpecError(f"training.fp8_param_gather (true): stack {st.name} gathers FP8 weights in FSDP2's "
                        f"all-gather, which needs parallel.zero 3, not {zero}")


def check_hardware(w: Workload, cluster: Cluster) -> None:
    """Precisions the workload asks of the cluster's GPU: FP8 GEMMs or FP8 gradients need FP8 tensor cores
    (the catalog entry has an ``fp8_tflops``; Ampere has none: NVIDIA A100 datasheet). A GPU without them makes
    the pair infeasible, not the file wrong: a multi-cluster plan shows that cluster as a column with this
    reason. The FP8 recipe must run on the GPU's architecture (:data:`RECIPE_ARCHS`)."""
    gpu = cluster.gpu
    for field, dtype in (("training.precision", w.training.precision),
                         ("training.grad_comm_dtype", w.training.grad_comm_dtype)):
        if dtype not in gpu.peak_flops:
            raise InfeasiblePlan(f"{field} ({dtype!r}) is not supported by gpu {gpu.name} of cluster {cluster.name}: "
                            f"it has {', '.join(sorted(gpu.peak_flops))}", rule="precision_supported")
    t = w.training
    if t.precision == "fp8" and gpu.arch not in RECIPE_ARCHS[t.fp8_recipe]:
        raise InfeasiblePlan(f"training.fp8_recipe ({t.fp8_recipe!r}) needs {' or '.join(RECIPE_ARCHS[t.fp8_recipe])} "
                             f"tensor cores; gpu {gpu.name} of cluster {cluster.name} is {gpu.arch}",
                             rule="precision_supported")


def workload_from_mapping(data: dict[str, Any], source: str = "workload") -> Workload:
    """Validate a parsed workload file and resolve its model; every error names ``source``."""
    check_kind(data, "workload", source)
    spec = validated(WorkloadSpec, data, source, "workload")
    try:
        model = resolve_model(spec.model)
        check_context_parallel(model, spec.parallel)
        check_pipeline_overlap(spec)
        if spec.training.recompute == "op_selective" and model.moe is not None:
            raise SpecError(f"training.recompute (op_selective): priced for dense blocks only; model {model.name} has "
                            "MoE layers, whose grouped expert GEMMs torchtitan's save list does not name")
        moe_set = sorted(k for k in spec.training.model_fields_set if k.startswith("moe_"))
        if moe_set and model.moe is None:
            raise SpecError(f"training.{moe_set[0]} ({getattr(spec.training, moe_set[0])}): model {model.name} has no "
                            "MoE layers (model.moe): there are no experts to load")
        if spec.overlap.ep_comm and model.moe is None:
            raise SpecError(f"overlap.ep_comm (true): model {model.name} has no MoE layers (model.moe): there is no "
                            "token dispatch to overlap")
        tp_comm_config(spec.overlap.tp_comm_config)
        resolved_stack = stack(spec.stack)
        check_stack_schedule(resolved_stack, spec.parallel)
        check_fp8_params(resolved_stack, spec)
    except SpecError as exc:
        raise SpecError(f"{source}: {exc}") from None
    return Workload(spec.name or model.name, model, Training(**spec.training.model_dump()),
                    Parallel(**spec.parallel.model_dump()), Overlap(**spec.overlap.model_dump()),
                    None if spec.data is None else Data.of(spec.data),
                    None if spec.checkpoint is None else Checkpoint.of(spec.checkpoint),
                    None if spec.sync is None else Sync.of(spec.sync), resolved_stack)


def load_workload(path: Path | str) -> Workload:
    """Read, validate and resolve a workload file (YAML or JSON)."""
    p = Path(path)
    return workload_from_mapping(read_mapping(p, "workload"), source_name(p, "workload"))
