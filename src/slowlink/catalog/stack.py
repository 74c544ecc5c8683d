"""Training stacks (workload ``stack:``): how each issues its data-parallel collectives (bucket sizes, per-unit
sharding, resharding after the forward) and which pipeline schedules it has. The stacks, each field with its source
in the stack's code, are in ``data/stacks.yaml``; a workload names one and may override any field."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from slowlink.catalog.store import nearest
from slowlink.errors import SpecError
from slowlink.fileio import SPEC_CONFIG, format_validation_error, parse_text

DEFAULT = "megatron-core"
DATA_FILE = "stacks.yaml"
OVERRIDE = "workload override"  # the source of a field a workload sets itself
Schedule = Literal["1f1b", "interleaved", "gpipe", "zero-bubble", "dualpipe"]
ShardedUnit = Literal["bucket", "layer"]
Reshard = Literal["always", "not_with_pp", "never"]
GradBuffer = Literal["reduce", "fp32"]
MomentDtype = Literal["fp32", "bf16"]
# How a stack can keep and gather FP8 weights (training.fp8_param_gather): none; fp8_params (the block's Linear weights
# stored in FP8 and all-gathered by the distributed optimizer in FP8: ZeRO 1/2); fsdp_all_gather (FSDP2 units
# all-gathered in FP8, the shards kept in fp32: ZeRO 3)
Fp8Params = Literal["none", "fp8_params", "fsdp_all_gather"]
# Groups a step's gradient-norm all-reduce runs over: tp_pp (Megatron's model-parallel group), tp, dp (dp x cp), pp,
# tp_cp_dp (every rank of one pipeline stage: a DTensor mesh without its pp axis) and world (every rank)
NormGroup = Literal["tp_pp", "tp", "dp", "pp", "tp_cp_dp", "world"]


def _as_tuple(v: object) -> object:
    """A YAML or JSON list as the tuple the strict schema takes."""
    return tuple(v) if isinstance(v, list) else v


class StackFields(BaseModel):
    """A stack's fields as values: the bundled file's (each read from ``{value, source}``) or a workload's overrides
    (every field optional there); frozen, so that a workload holding it stays hashable."""

    model_config = ConfigDict(**SPEC_CONFIG, frozen=True)
    grad_bucket_params: float | None = Field(
        None, gt=0, description="Parameters per DP gradient bucket (one reduce-scatter / all-reduce each).")
    grad_bucket_params_per_dp: float = Field(
        0.0, ge=0, description="With grad_bucket_params: the bucket grows to this x dp x cp parameters when larger "
        "(Megatron-Core: 1e6).")
    grad_bucket_bytes: float | None = Field(
        None, gt=0, description="The gradient bucket in bytes instead (PyTorch DDP's bucket_cap_mb x 2^20).")
    first_bucket_bytes: float | None = Field(
        None, gt=0, description="PyTorch DDP's smaller first bucket, the last layers' gradients (1 MiB).")
    buckets_without_overlap: bool = Field(
        True, description="Whether the gradient buckets are kept when overlap.grad_reduce is false (Megatron-Core: "
        "false, one call per buffer).")
    gather_bucket_params: float | None = Field(
        None, gt=0, description="ZeRO-1/2 parameter all-gather bucket in parameters; absent: the gradient buckets.")
    sharded_unit: ShardedUnit = Field(
        "bucket", description="ZeRO-2 gradient reduce-scatter granularity: bucket (the gradient buckets) or layer "
        "(one FSDP unit per transformer block, plus the embedding's and the output layer's).")
    reshard_after_forward: Reshard = Field(
        "always", description="ZeRO-3: always (each unit gathered again before its backward), not_with_pp "
        "(torchtitan's default: never under pipeline parallelism) or never.")
    pipeline_schedules: tuple[Schedule, ...] = Field(
        (), description="Pipeline schedules the stack implements: 1f1b, interleaved (virtual stages), gpipe, "
        "zero-bubble, dualpipe.")
    grad_buffer_dtype: GradBuffer = Field(
        "reduce", description="The gradient buffer the weight-gradient GEMMs accumulate into (training."
        "grad_accumulation fused): reduce (in the dtype the DP reduction runs in: fp32 when training.grad_comm_dtype "
        "is fp32, else the weights' dtype; Megatron-Core) or fp32 (always).")
    master_weights: bool = Field(
        True, description="Whether the optimizer keeps an fp32 master copy beside 16-bit weights (4 bytes a "
        "parameter).")
    optimizer_moment_dtype: MomentDtype = Field(
        "fp32", description="Dtype of Adam's two moments, exp_avg and exp_avg_sq.")
    grad_norm_groups: tuple[NormGroup, ...] = Field(
        (), description="The gradient-norm all-reduces of one step (one fp32 each, in order) without ZeRO: "
        "tp_pp, dp, pp, tp_cp_dp or world.")
    grad_norm_groups_sharded: tuple[NormGroup, ...] = Field(
        (), description="The same with ZeRO >= 1 (each rank holds a shard of the gradients or of the optimizer).")
    loss_syncs_per_micro_batch: int = Field(
        0, ge=0, description="All-reduces of the loss over DP that the last pipeline stage waits for in every "
        "micro-batch (logging).")
    fp8_param_gather: Fp8Params = Field(
        "none", description="What training.fp8_param_gather does on this stack: none (not offered), fp8_params (the "
        "block's Linear weights kept in FP8 and all-gathered in FP8 by the distributed optimizer, ZeRO 1/2) or "
        "fsdp_all_gather (ZeRO-3 units all-gathered in FP8, shards kept in fp32).")

    _listed = field_validator("pipeline_schedules", "grad_norm_groups", "grad_norm_groups_sharded",
                              mode="before")(_as_tuple)

    @model_validator(mode="after")
    def _one_bucket_unit(self) -> StackFields:
        if (self.grad_bucket_params is None) == (self.grad_bucket_bytes is None):
            raise ValueError(f"grad_bucket_params ({self.grad_bucket_params}) and grad_bucket_bytes "
                             f"({self.grad_bucket_bytes}): exactly one must be given, the bucket in parameters or "
                             "in bytes")
        return self


class StackOverrides(BaseModel):
    """A workload's ``stack:`` as a mapping: the bundled stack it starts from and the fields it changes."""

    model_config = SPEC_CONFIG
    name: str = Field(DEFAULT, description="The bundled stack (catalog/data/stacks.yaml) the fields below change.")
    grad_bucket_params: float | None = Field(None, gt=0, description=StackFields.model_fields[
        "grad_bucket_params"].description)
    grad_bucket_params_per_dp: float | None = Field(None, ge=0, description=StackFields.model_fields[
        "grad_bucket_params_per_dp"].description)
    grad_bucket_bytes: float | None = Field(None, gt=0, description=StackFields.model_fields[
        "grad_bucket_bytes"].description)
    first_bucket_bytes: float | None = Field(None, gt=0, description=StackFields.model_fields[
        "first_bucket_bytes"].description)
    buckets_without_overlap: bool | None = Field(None, description=StackFields.model_fields[
        "buckets_without_overlap"].description)
    gather_bucket_params: float | None = Field(None, gt=0, description=StackFields.model_fields[
        "gather_bucket_params"].description)
    sharded_unit: ShardedUnit | None = Field(None, description=StackFields.model_fields["sharded_unit"].description)
    reshard_after_forward: Reshard | None = Field(None, description=StackFields.model_fields[
        "reshard_after_forward"].description)
    pipeline_schedules: tuple[Schedule, ...] | None = Field(None, description=StackFields.model_fields[
        "pipeline_schedules"].description)
    grad_buffer_dtype: GradBuffer | None = Field(None, description=StackFields.model_fields[
        "grad_buffer_dtype"].description)
    master_weights: bool | None = Field(None, description=StackFields.model_fields["master_weights"].description)
    optimizer_moment_dtype: MomentDtype | None = Field(None, description=StackFields.model_fields[
        "optimizer_moment_dtype"].description)
    grad_norm_groups: tuple[NormGroup, ...] | None = Field(None, description=StackFields.model_fields[
        "grad_norm_groups"].description)
    grad_norm_groups_sharded: tuple[NormGroup, ...] | None = Field(None, description=StackFields.model_fields[
        "grad_norm_groups_sharded"].description)
    loss_syncs_per_micro_batch: int | None = Field(None, ge=0, description=StackFields.model_fields[
        "loss_syncs_per_micro_batch"].description)
    fp8_param_gather: Fp8Params | None = Field(None, description=StackFields.model_fields[
        "fp8_param_gather"].description)

    _listed = field_validator("pipeline_schedules", "grad_norm_groups", "grad_norm_groups_sharded",
                              mode="before")(_as_tuple)


class _Cited(BaseModel):
    model_config = SPEC_CONFIG
    value: Any = Field(description="The field's value.")
    source: str = Field(min_length=1, description="Where the stack sets it: file, commit or release, line or key.")


class _StackEntry(BaseModel):
    model_config = SPEC_CONFIG
    version: str = Field(min_length=1, description="The release or commit the sources below were read at.")
    repository: str = Field(min_length=1, description="The stack's repository.")
    grad_bucket_params: _Cited
    grad_bucket_params_per_dp: _Cited
    grad_bucket_bytes: _Cited
    first_bucket_bytes: _Cited
    buckets_without_overlap: _Cited
    gather_bucket_params: _Cited
    sharded_unit: _Cited
    reshard_after_forward: _Cited
    pipeline_schedules: _Cited
    grad_buffer_dtype: _Cited
    master_weights: _Cited
    optimizer_moment_dtype: _Cited
    grad_norm_groups: _Cited
    grad_norm_groups_sharded: _Cited
    loss_syncs_per_micro_batch: _Cited
    fp8_param_gather: _Cited


FIELDS = tuple(StackFields.model_fields)


@dataclass(frozen=True)
class Stack:
    """A resolved stack: every field's value and where it comes from (``sources``, field -> the stack's source or
    :data:`OVERRIDE`)."""

    name: str
    version: str
    repository: str
    fields: StackFields
    sources: tuple[tuple[str, str], ...]

    def grad_bucket_params(self, dp_shards: int, grad_bytes: float) -> float:
        """Parameters per gradient bucket at ``dp_shards`` ranks and ``grad_bytes`` bytes per gradient:
        max(grad_bucket_params, grad_bucket_params_per_dp x dp_shards), or grad_bucket_bytes / grad_bytes."""
        f = self.fields
        if f.grad_bucket_params is not None:
            return max(f.grad_bucket_params, f.grad_bucket_params_per_dp * dp_shards)
        assert f.grad_bucket_bytes is not None  # StackFields._one_bucket_unit
        return f.grad_bucket_bytes / grad_bytes

    def first_bucket_params(self, grad_bytes: float) -> float | None:
        """Parameters of PyTorch DDP's first bucket (None: every bucket full size)."""
        b = self.fields.first_bucket_bytes
        return None if b is None else b / grad_bytes

    def with_fields(self, **changes: object) -> Stack:
        """This stack with ``changes`` (fields of :class:`StackFields`) validated and marked :data:`OVERRIDE`."""
        try:
            fields = StackFields.model_validate({**self.fields.model_dump(), **changes})
        except ValidationError as exc:
            raise SpecError(format_validation_error(exc, "stack", "workload")) from None
        sources = tuple((k, OVERRIDE if k in changes else s) for k, s in self.sources)
        return Stack(self.name, self.version, self.repository, fields, sources)

    def to_json(self) -> dict[str, object]:
        """``plan --json``'s ``stack``: name, version, repository and each field as {value, source}."""
        src = dict(self.sources)
        values = self.fields.model_dump(mode="json")
        return {"name": self.name, "version": self.version, "repository": self.repository,
                "fields": {k: {"value": values[k], "source": src[k]} for k in FIELDS}}


def buckets(params: float, bucket_params: float, first_params: float | None = None) -> tuple[tuple[float, int], ...]:
    """(parameters, count) of the buckets ``params`` fill, first bucket first: the first of ``first_params`` when
    given, then full buckets of ``bucket_params``, the last holding the remainder. Bucket boundaries fall between
    whole tensors in every stack; the model does not know the tensors, so buckets are cut at exact sizes."""
    if params <= 0:
        return ()
    out: list[tuple[float, int]] = []
    if first_params is not None and first_params < params:
        out.append((first_params, 1))
        params -= first_params
    full = math.floor(params / bucket_params)
    rest = params - full * bucket_params
    if full:
        out.append((bucket_params, full))
    if rest > 0:
        out.append((rest, 1))
    return tuple(out)


def _entry(name: str, raw: Any, source: str) -> Stack:
    try:
        e = _StackEntry.model_validate(raw)
        cited = {k: getattr(e, k) for k in FIELDS}
        fields = StackFields.model_validate({k: c.value for k, c in cited.items()})
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc, f"{source}: {name}", "catalog")) from None
    return Stack(name, e.version, e.repository, fields, tuple((k, c.source) for k, c in cited.items()))


def parse_stacks(data: Any, source: str) -> dict[str, Stack]:
    """Validate the stacks file (parsed): every stack with every field cited, :data:`DEFAULT` among them."""
    if not isinstance(data, dict) or DEFAULT not in data:
        raise SpecError(f"{source}: (top level): must map stack names to stacks and hold {DEFAULT!r}")
    return {name: _entry(name, raw, source) for name, raw in data.items()}


@functools.cache
def stacks() -> dict[str, Stack]:
    """Every bundled stack by name."""
    text = (resources.files("slowlink.catalog") / "data").joinpath(DATA_FILE).read_text("utf-8")
    return parse_stacks(parse_text(text, DATA_FILE, as_json=False), DATA_FILE)


def stack(given: str | StackOverrides | None = None) -> Stack:
    """The stack a workload names (None: :data:`DEFAULT`), with its overrides; an unknown name lists the nearest."""
    over = StackOverrides(name=given) if isinstance(given, str) else given or StackOverrides()
    known = stacks()
    if over.name not in known:
        raise SpecError(f"stack ({over.name!r}) is not a bundled stack (catalog/data/{DATA_FILE}: "
                        f"{', '.join(known)}){nearest(over.name, list(known))}")
    base = known[over.name]
    changed = over.model_dump(exclude_none=True, exclude={"name"})
    if not changed:
        return base
    if "grad_bucket_bytes" in changed and "grad_bucket_params" not in changed:
        changed["grad_bucket_params"] = None  # a bucket in bytes replaces the stack's bucket in parameters
    if "grad_bucket_params" in changed and "grad_bucket_bytes" not in changed:
        changed["grad_bucket_bytes"] = None
    if "grad_bucket_params" in changed and "grad_bucket_params_per_dp" not in changed:
        # a bucket size given is the size: Megatron-Core applies max(40M, 1M x dp) only when bucket_size is None
        changed["grad_bucket_params_per_dp"] = 0.0
    return base.with_fields(**changed)
