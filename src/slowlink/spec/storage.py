"""The storage side of the specs: the cluster's storage tiers, per-client limits and retention, and the
workload's ``data:`` and ``checkpoint:`` sections, validated and resolved into SI units.

The cluster's ``storage:`` section (:class:`StorageSpec`: ``system``, ``read_gbyte_s``, ``write_gbyte_s``,
``metadata_ops_s``, ``targets``, and for the storage model ``tiers``, ``capacity_tb``, ``per_client_*``,
``retention``, ``data_tier``) is described here and resolved by :func:`storage_details`.
YAML key names are a contract: added, never renamed (docs/storage.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from slowlink import units
from slowlink.fileio import SPEC_CONFIG
from slowlink.spec.bounds import MetadataOpsS, StorageGbyteS

DEFAULT_TIER = "default"  # the name of the one tier a storage section without `tiers:` has


class StorageTierSpec(BaseModel):
    model_config = SPEC_CONFIG
    name: str = Field(min_length=1, description="Name of the tier, e.g. hot (NVMe) or capacity (disk, object).")
    capacity_tb: float = Field(gt=0, description="Usable capacity of the tier, TB (1e12 bytes).")
    read_gbyte_s: StorageGbyteS = Field(gt=0, description="Aggregate read bandwidth of the tier's media, GB/s.")
    write_gbyte_s: StorageGbyteS = Field(gt=0, description="Aggregate write bandwidth of the tier's media, GB/s.")


class RetentionSpec(BaseModel):
    model_config = SPEC_CONFIG
    keep_last: int = Field(2, ge=1, description="Most recent checkpoints kept; older ones are deleted after a "
                           "new one is complete (so keep_last + 1 exist while one is written).")
    keep_every: int | None = Field(None, ge=1, description="Also keep every k-th checkpoint for good (they "
                                   "accumulate until the tier is full); null: none kept for good.")
    tier: str | None = Field(None, description="Tier the checkpoints are written to; default: the first tier.")


# The choices of the data and checkpoint fields, shared with the resolved dataclasses below.
DataLayout = Literal["files", "shards"]
CheckpointMode = Literal["sync", "async"]
WeightsDtype = Literal["training", "fp32", "bf16", "fp16", "fp8"]
CheckpointLayout = Literal["sharded", "gathered"]


class DataSpec(BaseModel):
    """The workload's training data: how big a sample is, how it is laid out and read."""

    model_config = SPEC_CONFIG
    samples: int | None = Field(None, ge=1, description="Samples in the dataset (its size on storage).")
    bytes_per_sample: str | float | None = Field(
        None, description="Bytes read per sample (e.g. 110KiB for an ImageNet JPEG); null: the model's seq_len "
        "x bytes_per_token.")
    bytes_per_token: float | None = Field(
        None, gt=0, description="Bytes per stored token; null: 2 if the vocabulary fits uint16, else 4 (Megatron-LM's "
        "indexed dataset picks the smallest dtype).")
    layout: DataLayout = Field(
        "shards", description="files: one file per sample (one open per sample); shards: samples packed in large "
        "files (tar, webdataset, Megatron .bin) read sequentially.")
    samples_per_file: int = Field(1, ge=1, description="files layout: samples in each file.")
    shard_size: str | float = Field("1GB", description="shards layout: bytes per shard, e.g. 1GB.")
    format: Literal["raw", "jpeg", "webdataset", "tfrecord", "parquet", "npz", "hdf5", "megatron-bin"] = Field(
        "raw", description="On-disk format (shown in reports; decode cost is decode_ms_per_sample).")
    reader_workers_per_gpu: int = Field(4, ge=1, description="DataLoader worker processes per GPU.")
    decode_ms_per_sample: float | None = Field(
        None, ge=0, description="CPU time of one worker to read and decode one sample, ms; null: not modelled.")
    metadata_ops_per_file: float = Field(
        1.0, gt=0, description="Metadata operations per file opened (open; stat and close add more on NFS).")

    @field_validator("bytes_per_sample")
    @classmethod
    def _sample_size(cls, value: str | float | None) -> str | float | None:
        if value is not None and units.parse_size(value) <= 0:
            raise ValueError("must be > 0 bytes")
        return value

    @field_validator("shard_size")
    @classmethod
    def _shard_size(cls, value: str | float) -> str | float:
        if units.parse_size(value) <= 0:
            raise ValueError("must be > 0 bytes (a shard holds at least one sample)")
        return value


class CheckpointSpec(BaseModel):
    """The workload's checkpoints: how often, how they are written and what they hold."""

    model_config = SPEC_CONFIG
    interval_steps: int | None = Field(None, ge=1, description="Steps between checkpoints.")
    interval_minutes: float | None = Field(None, gt=0, description="Minutes between checkpoints (or interval_steps).")
    mode: CheckpointMode = Field(
        "sync", description="sync: training waits for the whole write; async: it waits for the copy to host "
        "memory, then a background drain writes it (torch.distributed.checkpoint.async_save).")
    save_optimizer: bool = Field(True, description="Save the optimizer state (fp32 master, Adam m and v).")
    weights_dtype: WeightsDtype = Field(
        "training", description="Precision the weights are saved in; training: as the step keeps them.")
    layout: CheckpointLayout = Field(
        "sharded", description="sharded: every rank writes its own shard; gathered: one rank writes it all.")
    host_staging_gib: float | None = Field(
        None, gt=0, description="async: pinned host memory per node for staging, GiB; null: not checked.")
    host_link: str | None = Field(
        None, description="async: catalog scale-up link of the GPU-to-host path (e.g. pcie-gen5); default: the "
        "GPU's host interface (its catalog entry's host_link).")
    verified: bool = Field(
        False, description="The job seals each checkpoint with a checksum manifest and verifies it before a "
        "restore (as slowlink drill does): the digest is on the step's critical path in sync mode, in the drain "
        "in async mode, and before every restore.")

    @model_validator(mode="after")
    def _one_interval(self) -> CheckpointSpec:
        if (self.interval_steps is None) == (self.interval_minutes is None):
            raise ValueError(f"interval_steps ({self.interval_steps}) and interval_minutes ({self.interval_minutes}):"
                             " give exactly one of them")
        return self



@dataclass(frozen=True)
class Data:
    """The training data, resolved: sizes in bytes, times in seconds (every field as :class:`DataSpec` documents
    it)."""

    samples: int | None
    bytes_per_sample: float | None  # None: the model's seq_len x bytes_per_token
    bytes_per_token: float | None
    layout: DataLayout
    samples_per_file: int
    shard_bytes: float
    format: str
    reader_workers_per_gpu: int
    decode_s_per_sample: float | None
    metadata_ops_per_file: float

    @classmethod
    def of(cls, spec: DataSpec | None = None, **given: Any) -> Data:
        """``spec`` resolved, or a section written in code (``given``) validated as a file's ``data:``."""
        d = spec if spec is not None else DataSpec(**given)
        return cls(d.samples, None if d.bytes_per_sample is None else units.parse_size(d.bytes_per_sample),
                   d.bytes_per_token, d.layout, d.samples_per_file, units.parse_size(d.shard_size), d.format,
                   d.reader_workers_per_gpu,
                   None if d.decode_ms_per_sample is None else d.decode_ms_per_sample * units.MS,
                   d.metadata_ops_per_file)


@dataclass(frozen=True)
class Checkpoint:
    """The checkpoints, resolved (every field as :class:`CheckpointSpec` documents it)."""

    interval_steps: int | None
    interval_minutes: float | None
    mode: CheckpointMode
    save_optimizer: bool
    weights_dtype: WeightsDtype
    layout: CheckpointLayout
    host_staging_gib: float | None
    host_link: str | None
    verified: bool = False

    @classmethod
    def of(cls, spec: CheckpointSpec | None = None, **given: Any) -> Checkpoint:
        """``spec`` resolved, or a section written in code (``given``) validated as a file's ``checkpoint:``."""
        return cls(**(spec if spec is not None else CheckpointSpec(**given)).model_dump())

class StorageSpec(BaseModel):
    model_config = SPEC_CONFIG
    system: Literal["nfs", "parallel-fs", "nvme-of", "object"] = Field(description="Kind of storage.")
    shared_with_compute: bool = Field(False, description="Storage traffic rides the compute fabric.")
    read_gbyte_s: StorageGbyteS = Field(gt=0, description="Aggregate read bandwidth, GB/s.")
    write_gbyte_s: StorageGbyteS = Field(gt=0, description="Aggregate write bandwidth, GB/s.")
    metadata_ops_s: MetadataOpsS = Field(gt=0, description="Metadata operations (open, stat) per second.")
    targets: int = Field(8, ge=1, description="Storage servers / targets that traffic spreads over.")
    # The storage model's keys (docs/storage.md).
    per_client_read_gbyte_s: float | None = Field(None, gt=0, description="Read limit of one client node, GB/s.")
    per_client_write_gbyte_s: float | None = Field(None, gt=0, description="Write limit of one client node, GB/s.")
    capacity_tb: float | None = Field(None, gt=0, description="Usable capacity, TB, when no tiers are given.")
    tiers: list[StorageTierSpec] = Field(default_factory=list, description="Tiers (e.g. hot NVMe, capacity).")
    retention: RetentionSpec | None = Field(None, description="Checkpoints kept: keep_last, keep_every, tier.")
    data_tier: str | None = Field(None, description="Tier holding the dataset; default: the first tier.")

    @model_validator(mode="after")
    def _storage_model(self) -> StorageSpec:
        check_storage(self)
        return self


@dataclass(frozen=True)
class Tier:
    name: str
    capacity_bytes: float | None
    read_bytes_s: float
    write_bytes_s: float


@dataclass(frozen=True)
class StorageDetails:
    """What the storage model needs beyond the aggregate rates: tiers, per-client limits, retention."""

    tiers: tuple[Tier, ...]
    per_client_read_bytes_s: float | None
    per_client_write_bytes_s: float | None
    keep_last: int
    keep_every: int | None
    checkpoint_tier: str
    data_tier: str

    def tier(self, name: str) -> Tier:
        return next(t for t in self.tiers if t.name == name)


def check_storage(spec: StorageSpec) -> None:
    """Rules across the storage keys (tier names, capacity given once); a ValueError names field and value."""
    names = [t.name for t in spec.tiers]
    for i, n in enumerate(names):
        if n in names[:i]:
            raise ValueError(f"tiers.{i}.name ({n!r}) is also the name of tiers.{names.index(n)}: "
                             "each tier needs its own name")
    if spec.tiers and spec.capacity_tb is not None:
        raise ValueError(f"capacity_tb ({spec.capacity_tb}) and tiers are both given: the "
                         "capacity is the sum of the tiers' capacity_tb, give it there")
    known = names or [DEFAULT_TIER]
    for field, value in (("retention.tier", spec.retention.tier if spec.retention else None),
                         ("data_tier", spec.data_tier)):
        if value is not None and value not in known:
            raise ValueError(f"{field} ({value!r}) must name a tier: {', '.join(known)}")


def plain_details(read_bytes_s: float, write_bytes_s: float) -> StorageDetails:
    """The details of a storage section that gives none of the storage model's keys: one tier of unknown
    capacity at the aggregate rates, no per-client limit, the default retention."""
    ret = RetentionSpec()
    return StorageDetails((Tier(DEFAULT_TIER, None, read_bytes_s, write_bytes_s),), None, None, ret.keep_last,
                          ret.keep_every, DEFAULT_TIER, DEFAULT_TIER)


def storage_details(spec: StorageSpec) -> StorageDetails:
    """Resolve the storage model's keys into SI units (the spec was checked by :func:`check_storage`)."""
    if spec.tiers:
        tiers = tuple(Tier(t.name, t.capacity_tb * units.TB, t.read_gbyte_s * units.GB, t.write_gbyte_s * units.GB)
                      for t in spec.tiers)
    else:
        cap = None if spec.capacity_tb is None else spec.capacity_tb * units.TB
        tiers = (Tier(DEFAULT_TIER, cap, spec.read_gbyte_s * units.GB, spec.write_gbyte_s * units.GB),)
    ret = spec.retention or RetentionSpec()
    pr, pw = spec.per_client_read_gbyte_s, spec.per_client_write_gbyte_s
    return StorageDetails(
        tiers=tiers,
        per_client_read_bytes_s=None if pr is None else pr * units.GB,
        per_client_write_bytes_s=None if pw is None else pw * units.GB,
        keep_last=ret.keep_last, keep_every=ret.keep_every,
        checkpoint_tier=ret.tier or tiers[0].name, data_tier=spec.data_tier or tiers[0].name)
