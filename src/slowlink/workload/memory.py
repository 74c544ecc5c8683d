"""Memory per GPU: weights, gradients, optimizer states (by ZeRO stage), activations (by recompute mode).

Mixed-precision Adam (Rajbhandari et al. 2020, ZeRO): 2 bytes of weights, 4 of fp32 main gradients and
12 of optimizer state (fp32 master, m, v) per parameter; fp32 training: 4 + 4 + 8 (the weights are the
master copy). ZeRO 1 shards the optimizer over dp, 2 also the gradients, 3 also the weights.
Activations per layer and micro-batch (Korthikanti et al. 2022, Sec. 4):
  no recompute, TP t:        s*b*h*(10 + 24/t + 5*a*s/(h*t))   bytes
  with sequence parallelism: s*b*h*(34/t + 5*a*s/(h*t))
  selective recompute:       drops the 5*a*s/(h*t) term (so does fused/flash attention)
  full recompute:            2*s*b*h (the layer input; /t with SP)
(16-bit activations; fp32 training doubles them, the 1-byte dropout masks included, an overestimate of
at most 2*s*b*h + a*s*s*b per layer.)
A 1F1B first stage holds pp micro-batches of its layers; interleaving multiplies by 1 + (pp-1)/(pp*vp).
"""

from __future__ import annotations

from dataclasses import dataclass

from slowlink import units
from slowlink.errors import InfeasiblePlan
from slowlink.workload.flops import params
from slowlink.workload.spec import Workload

WORKSPACE_BYTES = 2.0 * units.GiB  # CUDA context, NCCL buffers, allocator fragmentation (assumption)


@dataclass(frozen=True)
class Memory:
    weights_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    workspace_bytes: float

    @property
    def total_bytes(self) -> float:
        return (self.weights_bytes + self.grads_bytes + self.optimizer_bytes + self.activations_bytes
                + self.workspace_bytes)

    def to_json(self) -> dict[str, float]:
        return {k.removesuffix("_bytes") + "_gib": v / units.GiB for k, v in self.__dict__.items()} | {
            "total_gib": self.total_bytes / units.GiB}


def kept_bytes(precision: str) -> float:
    """Bytes of one weight or activation element as the step keeps and moves it: 4 in fp32 training, else 2
    (FP8 GEMMs keep 16-bit weights and activations, as Transformer Engine does)."""
    return 4.0 if precision == "fp32" else 2.0


def optimizer_state_bytes(precision: str) -> float:
    """Bytes of Adam state per parameter: m and v in fp32 (8), plus the fp32 master copy (4) under mixed
    precision; in fp32 training the weights are the master (Rajbhandari et al. 2020, Sec. 3.1)."""
    return 8.0 if precision == "fp32" else 12.0


def params_per_gpu(w: Workload) -> float:
    """Parameters one GPU holds before ZeRO sharding: dense / (tp*pp), experts / (tp*pp*ep)."""
    dense, expert = params(w.model)
    p = w.parallel
    return dense / (p.tp * p.pp) + expert / (p.tp * p.pp * p.ep)


def activation_bytes_per_layer(w: Workload, recompute: str | None = None) -> float:
    """Bytes of activations one layer keeps per micro-batch (Korthikanti et al. 2022, Table 2).

    ``recompute`` overrides the workload's mode (the compute model prices the traffic of every
    activation, kept or not, with ``"none"``).
    """
    m, p, t = w.model, w.parallel, w.training
    mode = t.recompute if recompute is None else recompute
    sbh = m.seq_len / p.cp * t.micro_batch * m.hidden
    attn = 5.0 * m.heads * m.seq_len / (m.hidden * p.tp)
    sp = p.sequence_parallel and p.tp > 1
    scale = kept_bytes(t.precision) / 2.0
    if mode == "full":
        return scale * 2.0 * sbh / (p.tp if sp else 1)
    base = 34.0 / p.tp if sp else 10.0 + 24.0 / p.tp
    return scale * sbh * (base + (0.0 if mode == "selective" or t.flash_attention else attn))


def memory(w: Workload) -> Memory:
    """Memory of the most loaded GPU (the first pipeline stage)."""
    p, t = w.parallel, w.training
    n = params_per_gpu(w)
    shard = p.dp * p.cp
    layers = p.first_stage_layers if p.first_stage_layers is not None else w.model.layers // p.pp
    micro = t.global_batch // (t.micro_batch * p.dp)
    inflight = min(p.pp, micro) * (1.0 + (p.pp - 1) / (p.pp * p.vp) if p.vp > 1 else 1.0)
    weights = kept_bytes(t.precision)
    states = optimizer_state_bytes(t.precision)
    return Memory(
        weights_bytes=weights * n / (shard if p.zero >= 3 else 1),
        grads_bytes=4.0 * n / (shard if p.zero >= 2 else 1),
        optimizer_bytes=states * n / (shard if p.zero >= 1 else 1),
        activations_bytes=activation_bytes_per_layer(w) * layers * inflight,
        workspace_bytes=WORKSPACE_BYTES,
    )


def check_fits(mem: Memory, hbm_bytes: float) -> None:
    """Raise :class:`InfeasiblePlan` with the breakdown when the plan exceeds the GPU's HBM."""
    if mem.total_bytes > hbm_bytes:
        parts = ", ".join(f"{k} {v:.1f}" for k, v in mem.to_json().items() if k != "total_gib")
        raise InfeasiblePlan(
            f"memory per GPU ({mem.total_bytes / units.GiB:.1f} GiB) exceeds the GPU's HBM "
            f"({hbm_bytes / units.GiB:.1f} GiB): {parts} GiB; try more tp/pp, zero, recompute or a smaller micro_batch"
        )
