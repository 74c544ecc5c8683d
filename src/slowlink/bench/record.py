"""Result records: every benchmark writes one JSON file with its rows and the environment it ran in.

A record is ``{"kind", "created_utc", "env", "config", "rows"}``; ``kind`` is collectives, compute,
train, storage or checkpoint. The environment names the torch, backend, CUDA, NCCL and driver versions, the
hosts of every rank and, when given, the cluster file (path, name, sha256), so that two records can be told apart.

Readers get a :data:`Record`: the kind's frozen pydantic model with typed rows. The document as written is
kept beside it, and :meth:`~_Record.to_json` gives it back unchanged (a record saved as a baseline, or printed
with ``--json``, is byte for byte what was read).
"""

from __future__ import annotations

import copy
import datetime
import hashlib
import json
import platform
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    model_validator,
)

from slowlink import __version__
from slowlink.bench.nccl_tests import NcclTestsRun, looks_like_nccl_tests, parse_nccl_tests
from slowlink.errors import BenchError, SpecError
from slowlink.fileio import parse_text, read_text, validated

KINDS = ("collectives", "compute", "train", "storage", "checkpoint")

# Rows keep every key a benchmark wrote (extra="allow"); the keys the readers use (compare, calibrate,
# collective --compare) are checked: present, of their type (strict: no bool for an int), finite, positive.
# Columns only shown (the nccl-tests table's count, root, algbw, in-place half) are typed but may be NaN.
_ROW = ConfigDict(extra="allow", strict=True, allow_inf_nan=False, frozen=True)


def _int_as_written(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    checked = handler(value)
    return value if type(value) is int else checked


# A number checked as a float but kept as written: a size of 1024 stays 1024 (not 1024.0) in compare's row keys
# and in --json output, as it was when records were read as dicts.
_AsWritten = Annotated[float, WrapValidator(_int_as_written)]


class CollectiveHalf(BaseModel):
    """The in-place half of a collectives row (shown beside the out-of-place half, never computed on)."""

    model_config = _ROW
    time_s: float = Field(allow_inf_nan=True, description="In-place time per iteration, seconds.")
    algbw_gbyte_s: float = Field(allow_inf_nan=True, description="Algorithm bandwidth, GB/s.")
    busbw_gbyte_s: float = Field(allow_inf_nan=True, description="Bus bandwidth, GB/s.")
    wrong: int = Field(description="Wrong elements found by the check; -1 when not checked.")


class CollectiveRow(BaseModel):
    """One size of a collectives sweep (nccl-tests' columns)."""

    model_config = _ROW
    op: str = Field(min_length=1, description="Collective, e.g. all_reduce.")
    size_bytes: _AsWritten = Field(gt=0, description="Size in nccl-tests' convention, bytes.")
    ranks: int = Field(ge=1, description="Ranks of the communicator.")
    time_s: float = Field(gt=0, description="Out-of-place time per iteration, seconds.")
    busbw_gbyte_s: float = Field(ge=0, description="Bus bandwidth, GB/s.")
    redop: str = Field("sum", description="Reduction operator, or none.")
    type: str = Field("float", description="Element type (nccl-tests' name).")
    wrong: int = Field(0, ge=-1, description="Wrong elements found by the check; -1 when not checked.")
    # Added later: records written before have neither, and still load (tests/bench/test_record.py).
    rank_time_s: list[Annotated[float, Field(gt=0)]] | None = Field(
        None, description="Every rank's own out-of-place time per iteration, by rank, seconds.")
    rank_wait_s: list[Annotated[float, Field(ge=0)]] | None = Field(
        None, description="The part of rank_time_s each rank spent inside the collective calls (gloo only).")
    backend: str | None = Field(None, description="gloo or nccl.")
    count: int | None = Field(None, description="Elements per rank (nccl-tests' count).")
    root: int | None = Field(None, description="Root rank of broadcast and reduce; -1 for the others.")
    algbw_gbyte_s: float | None = Field(None, allow_inf_nan=True, description="Algorithm bandwidth, GB/s.")
    in_place: CollectiveHalf | None = Field(None, description="The in-place half, when the op has one.")

    @property
    def measured_ranks(self) -> bool:
        """Whether the row has every rank's own time and wait (``bench collectives`` over gloo)."""
        return bool(self.rank_time_s) and bool(self.rank_wait_s)

    @model_validator(mode="after")
    def _one_per_rank(self) -> CollectiveRow:
        for name in ("rank_time_s", "rank_wait_s"):
            got = getattr(self, name)
            if got is not None and len(got) != self.ranks:
                raise ValueError(f"{name} has {len(got)} values: must have one per rank ({self.ranks})")
        return self


class ComputeRow(BaseModel):
    """One GEMM shape and dtype of a compute benchmark."""

    model_config = _ROW
    m: int = Field(ge=1, description="GEMM rows.")
    n: int = Field(ge=1, description="GEMM columns.")
    k: int = Field(ge=1, description="GEMM inner dimension.")
    dtype: str = Field(min_length=1, description="fp32, bf16 or fp16.")
    tflops: float = Field(gt=0, description="Achieved TFLOP/s.")
    time_s: float | None = Field(None, allow_inf_nan=True, description="Time per GEMM, seconds.")


class TrainProfile(BaseModel):
    """Rank 0's compute-only step by kernel class, seconds per step (``bench train --profile``,
    slowlink.bench.profile)."""

    model_config = _ROW
    gemm_s: float = Field(ge=0, description="GEMM kernels (CPU: aten matrix products, self time).")
    attention_s: float = Field(ge=0, description="Attention kernels (flash, memory-efficient, cuDNN SDPA).")
    elementwise_s: float = Field(ge=0, description="Memory-bound kernels: norms, activations, casts, loss.")
    optimizer_s: float = Field(ge=0, description="Everything inside Optimizer.step.")
    other_s: float = Field(ge=0, description="Kernels no rule names (CPU: views and allocations).")
    idle_s: float = Field(ge=0, description="Wall minus the kernels' busy union (CPU: minus the ops' self time).")
    wall_s: float = Field(gt=0, description="Wall time of a profiled step.")
    elementwise_copy_s: float = Field(ge=0, description="Of elementwise: copies and dtype casts (autocast's).")


class TrainPlan(BaseModel):
    """plan's step for the model a train row ran, set against the measurement (``bench train --cluster``,
    :func:`slowlink.bench.train_plan.compare_with_plan`)."""

    model_config = _ROW
    step_time_s: float = Field(gt=0, description="plan's step time, seconds.")
    compute_s: float | None = Field(None, description="plan's compute per step, seconds.")
    exposed_comm_s: float | None = Field(None, description="plan's communication not hidden by compute, seconds.")
    comm_compute_ratio: float | None = Field(None, description="plan's communication / compute.")
    mfu: float | None = Field(None, description="plan's model FLOPs utilisation, a fraction.")
    error_pct: float = Field(description="(plan's step - measured step) / measured step, percent.")
    profile: dict[str, float] | None = Field(
        None, description="The step model's seconds per compute-only step by kernel class (with --profile).")
    profile_diff: dict[str, float] | None = Field(None, description="Measured - model, by kernel class, seconds.")

    def to_json(self) -> dict[str, Any]:
        """The keys it was made with, in the order above (a record's row ``plan``)."""
        return self.model_dump(exclude_unset=True)


class TrainRow(BaseModel):
    """One rank count of a training benchmark."""

    model_config = _ROW
    mode: str = Field(min_length=1, description="ddp or fsdp.")
    ranks: int = Field(ge=1, description="Ranks trained on.")
    step_time_s: float = Field(gt=0, description="Mean step time, seconds.")
    rank_compute_s: list[Annotated[float, Field(gt=0)]] | None = Field(
        None, description="Every rank's own compute-only step, by rank, seconds.")
    profile: TrainProfile | None = Field(None, description="The compute-only step by kernel class (--profile).")
    precision: str | None = Field(None, description="bf16, fp16 or fp32, as run.")
    compute_s: float | None = Field(None, allow_inf_nan=True, description="Mean compute-only step, seconds.")
    exposed_comm_s: float | None = Field(None, allow_inf_nan=True,
                                         description="Step minus compute-only step, seconds.")
    comm_compute_ratio: float | None = Field(None, allow_inf_nan=True, description="Communication / compute.")
    mfu: float | None = Field(None, allow_inf_nan=True, description="Model FLOPs utilisation, when a peak is known.")
    plan: TrainPlan | None = Field(None, description="plan's step for this run (--cluster).")


class StorageRow(BaseModel):
    """One layout and order of a storage read benchmark (slowlink.bench.storage)."""

    model_config = _ROW
    layout: str = Field(min_length=1, description="files or shards.")
    order: str = Field(min_length=1, description="sequential or shuffled.")
    workers: int = Field(ge=0, description="DataLoader workers.")
    files_per_s: float = Field(gt=0, description="Samples (source files) delivered per second.")
    mbyte_s: float = Field(gt=0, description="MB/s delivered.")
    files_opened: int | None = Field(None, description="Files the pass opened (the shards, for shards).")
    latency_p50_ms: float | None = Field(None, allow_inf_nan=True, description="Median batch latency, ms.")
    latency_p99_ms: float | None = Field(None, allow_inf_nan=True, description="99th-percentile batch latency, ms.")
    resident_after: float | None = Field(None, allow_inf_nan=True,
                                         description="Share of the files' pages in the page cache after the pass.")
    predicted_files_per_s: float | None = Field(None, allow_inf_nan=True, description="The model's samples/s.")
    predicted_mbyte_s: float | None = Field(None, allow_inf_nan=True, description="The model's MB/s.")
    predicted_binding: str | None = Field(None, description="What bounds the model: bandwidth, per-file, reader CPU.")
    error: float | None = Field(None, allow_inf_nan=True, description="Model's rate / measured - 1.")


class CheckpointRow(BaseModel):
    """One mode and rank count of a checkpoint benchmark (slowlink.bench.checkpoint)."""

    model_config = _ROW
    mode: str = Field(min_length=1, description="sync or async.")
    ranks: int = Field(ge=1, description="Ranks that saved.")
    blocking_s: float = Field(gt=0, description="Seconds the save blocked training.")
    drain_s: float = Field(ge=0, description="Seconds from then until written (async), 0 for sync.")
    restore_s: float = Field(gt=0, description="Seconds to load it back, page cache evicted.")
    bytes: float | None = Field(None, description="Bytes saved, all ranks.")
    gbyte_s: float | None = Field(None, allow_inf_nan=True, description="Bytes / (blocking + drain), GB/s.")
    predicted_blocking_s: float | None = Field(None, allow_inf_nan=True, description="The model's blocking, s.")
    predicted_drain_s: float | None = Field(None, allow_inf_nan=True, description="The model's drain, s.")
    predicted_restore_s: float | None = Field(None, allow_inf_nan=True, description="The model's restore, s.")
    write_error: float | None = Field(None, allow_inf_nan=True, description="Model's write time / measured - 1.")
    restore_error: float | None = Field(None, allow_inf_nan=True, description="Model's restore / measured - 1.")


class RecordEnv(BaseModel):
    """The parts of a record's environment that readers use; everything else is kept as written."""

    model_config = _ROW
    hostnames: list[str] | None = Field(None, description="Host of every rank.")
    backend: str | None = Field(None, description="gloo or nccl.")
    host: str | None = Field(None, description="The host that wrote the record.")
    torch: str | None = Field(None, description="PyTorch version.")
    cuda: str | None = Field(None, description="CUDA version PyTorch was built with; null on a CPU.")
    nccl: str | None = Field(None, description="NCCL version; null on a CPU.")
    driver: str | None = Field(None, description="NVIDIA driver version; null on a CPU.")
    kernel: str | None = Field(None, description="Linux kernel release, when a record states it.")

    def versions(self) -> dict[str, str | None]:
        """The versions the doctor compares across inputs, by name."""
        return {"nccl": self.nccl, "torch": self.torch, "driver": self.driver, "cuda": self.cuda,
                "kernel": self.kernel}


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False, frozen=True)
    kind: Literal["collectives", "compute", "train", "storage", "checkpoint"] = Field(
        description="Which benchmark wrote it.")
    created_utc: str | None = Field(None, description="When it was written, ISO 8601 UTC.")
    env: RecordEnv = Field(default_factory=RecordEnv, description="Versions and hosts of the run.")
    config: dict[str, Any] = Field(default_factory=dict, description="The benchmark's options.")
    _doc: dict[str, Any] = PrivateAttr(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The record as written (every key, in its order): what a record file and ``--json`` hold."""
        return copy.deepcopy(self._doc)

    @property
    def hosts(self) -> list[str]:
        """The host of every rank, or [] when the record does not say."""
        return list(self.env.hostnames or [])


class CollectivesRecord(_Record):
    rows: list[CollectiveRow] = Field(min_length=1, description="One row per size (and reduction).")


class ComputeRecord(_Record):
    rows: list[ComputeRow] = Field(min_length=1, description="One row per shape and dtype.")


class TrainRecord(_Record):
    rows: list[TrainRow] = Field(min_length=1, description="One row per rank count.")


class StorageRecord(_Record):
    rows: list[StorageRow] = Field(min_length=1, description="One row per layout and order.")


class CheckpointRecord(_Record):
    rows: list[CheckpointRow] = Field(min_length=1, description="One row per mode and rank count.")


@dataclass(frozen=True)
class RankRows:
    """What a benchmark's rank 0 hands back to the launcher: its ``rows`` (the record's, as written; checked
    into typed rows by :func:`make_record`) and the host of every rank."""

    rows: list[dict[str, Any]]
    hostnames: list[str]


Record = CollectivesRecord | ComputeRecord | TrainRecord | StorageRecord | CheckpointRecord
Row = CollectiveRow | ComputeRow | TrainRow | StorageRow | CheckpointRow

R = TypeVar("R", bound=_Record)

RECORD_MODELS: dict[str, type[Record]] = {
    "collectives": CollectivesRecord, "compute": ComputeRecord, "train": TrainRecord,
    "storage": StorageRecord, "checkpoint": CheckpointRecord,
}


def _driver_version() -> str | None:
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        res = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout.strip().splitlines()[0] if res.returncode == 0 and res.stdout.strip() else None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def environment(backend: str, hostnames: list[str] | None = None, cluster_file: Path | None = None) -> dict[str, Any]:
    """Versions and hosts of this run (torch is imported: only call this from a benchmark)."""
    import torch

    cuda = bool(torch.cuda.is_available())
    env: dict[str, Any] = {
        "slowlink": __version__, "python": platform.python_version(), "platform": platform.platform(),
        "torch": torch.__version__, "backend": backend, "cuda": torch.version.cuda,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())) if cuda else None,  # type: ignore[no-untyped-call]
        "driver": _driver_version() if cuda else None,
        "device": torch.cuda.get_device_name(0) if cuda else _cpu_model(),
        "cpu_threads": torch.get_num_threads(), "host": socket.gethostname(),
        "hostnames": hostnames or [socket.gethostname()], "argv": sys.argv,
        "cluster_file": None,
    }
    if cluster_file is not None:
        data = Path(cluster_file).read_bytes()
        env["cluster_file"] = {"path": str(Path(cluster_file).resolve()),
                               "sha256": hashlib.sha256(data).hexdigest()}
    return env


def make_record(kind: str, rows: list[dict[str, Any]], config: dict[str, Any], backend: str,
                hostnames: list[str] | None = None, cluster_file: Path | None = None,
                summary: dict[str, Any] | None = None) -> Record:
    """The record of a run that just ended (this host's environment, torch imported), checked as a reader will
    read it: the document goes through JSON first, so what is checked is what the file will hold."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    doc: dict[str, Any] = {"kind": kind, "created_utc": now, "env": environment(backend, hostnames, cluster_file),
                           "config": config, "rows": rows}
    if summary is not None:
        doc["summary"] = summary
    return check_record(json.loads(json.dumps(doc, default=float)), f"the {kind} record")


def write_record(rec: Record, results_dir: Path, label: str) -> Path:
    """Write ``rec`` as ``<dir>/<kind>-<label>-<UTC time>-<host>.json`` and return the path."""
    try:
        results_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BenchError(f"--results ({str(results_dir)!r}) cannot be created: {exc.strerror}") from None
    stamp = (rec.created_utc or "").replace(":", "").replace("-", "")
    path = results_dir / f"{rec.kind}-{label}-{stamp}-{rec.env.host}.json"
    i = 1
    while path.exists():
        path = path.with_name(f"{path.stem.rsplit('.', 1)[0]}.{i}.json")
        i += 1
    path.write_text(json.dumps(rec.to_json(), indent=2, default=float) + "\n")
    return path


def _row_kind(rows: list[Any]) -> str:
    """The kind of a bare list of rows (``bench ... --json`` output), by the keys of its first row."""
    first = rows[0] if rows and isinstance(rows[0], dict) else {}
    for kind, key in (("collectives", "busbw_gbyte_s"), ("compute", "tflops"), ("train", "step_time_s"),
                      ("storage", "files_per_s"), ("checkpoint", "blocking_s")):
        if key in first:
            return kind
    return "unknown"


def check_record(data: Any, source: str) -> Record:
    """``data`` (a parsed record, or a bare list of rows) as its kind's typed record; ``data`` is kept as the
    record's JSON (:meth:`_Record.to_json`)."""
    if isinstance(data, list):
        data = {"kind": _row_kind(data), "env": {}, "config": {}, "rows": data}
    if not isinstance(data, dict) or data.get("kind") not in KINDS:
        kind = data.get("kind") if isinstance(data, dict) else type(data).__name__
        raise SpecError(f"{source}: kind ({kind!r}) must be one of {', '.join(KINDS)}, with a list of rows "
                        "(write one with `slowlink bench ...`)")
    return _typed(RECORD_MODELS[data["kind"]], data, source)


def _typed(model: type[R], data: dict[str, Any], source: str) -> R:
    rec = validated(model, data, source, "record")
    rec._doc = data
    return rec


def nccl_tests_record(run: NcclTestsRun, source: str) -> CollectivesRecord:
    """The run as a slowlink collectives record (bench/record.py's schema, checked) so that ``compare`` and
    ``calibrate`` read it like a ``slowlink bench collectives`` result."""
    rows = [{"op": run.op, "size_bytes": int(r.size_bytes), "count": r.count, "type": r.type, "redop": r.redop,
             "root": r.root, "ranks": run.ranks, "backend": "nccl", "time_s": r.time_s,
             "algbw_gbyte_s": r.algbw_gbyte_s, "busbw_gbyte_s": r.busbw_gbyte_s, "wrong": r.wrong,
             "in_place": r.in_place} for r in run.rows]
    env = {"backend": "nccl", "hostnames": list(run.hostnames) or None, "devices": list(run.devices),
           "tool": "nccl-tests", "nccl_tests_generation": run.generation}
    return _typed(CollectivesRecord, {"kind": "collectives", "created_utc": None, "env": env,
                                      "config": {"op": run.op, "source": source, "params": run.params},
                                      "rows": rows, "summary": {"avg_busbw_gbyte_s": run.avg_busbw_gbyte_s}}, source)


def load_record(path: Path | str) -> Record:
    """A record file, a bare list of rows (``bench ... --json`` output) or nccl-tests stdout, as a checked record.

    A NaN in a column no reader uses is kept (a benchmark may write one); the schema refuses it where read.
    """
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"result ({str(p)!r}) does not exist or is not a file")
    text = read_text(p, "result")
    if not text.lstrip().startswith(("{", "[")) and looks_like_nccl_tests(text):  # nccl-tests stdout
        return nccl_tests_record(parse_nccl_tests(text, str(p)), str(p))
    return check_record(parse_text(text, str(p), as_json=True, finite=False), str(p))
