"""Result records: every benchmark writes one JSON file with its rows and the environment it ran in.

A record is ``{"kind", "created_utc", "env", "config", "rows"}``; ``kind`` is collectives, compute,
train, storage or checkpoint. The environment names the torch, backend, CUDA, NCCL and driver versions, the
hosts of every rank and, when given, the cluster file (path, name, sha256), so that two records can be told apart.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import platform
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from slowlink import __version__
from slowlink.errors import BenchError, SpecError
from slowlink.fileio import parse_text, read_text, validated

KINDS = ("collectives", "compute", "train", "storage", "checkpoint")

# Rows keep every key a benchmark wrote (extra="allow"); the keys the readers use (compare, calibrate,
# collective --compare) are checked: present, of their type (strict: no bool for an int), finite, positive.
_ROW = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)


class CollectiveRow(BaseModel):
    """One size of a collectives sweep (nccl-tests' columns)."""

    model_config = _ROW
    op: str = Field(min_length=1, description="Collective, e.g. all_reduce.")
    size_bytes: float = Field(gt=0, description="Size in nccl-tests' convention, bytes.")
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


class TrainRow(BaseModel):
    """One rank count of a training benchmark."""

    model_config = _ROW
    mode: str = Field(min_length=1, description="ddp or fsdp.")
    ranks: int = Field(ge=1, description="Ranks trained on.")
    step_time_s: float = Field(gt=0, description="Mean step time, seconds.")
    profile: TrainProfile | None = Field(None, description="The compute-only step by kernel class (--profile).")


class StorageRow(BaseModel):
    """One layout and order of a storage read benchmark (slowlink.bench.storage)."""

    model_config = _ROW
    layout: str = Field(min_length=1, description="files or shards.")
    order: str = Field(min_length=1, description="sequential or shuffled.")
    workers: int = Field(ge=0, description="DataLoader workers.")
    files_per_s: float = Field(gt=0, description="Samples (source files) delivered per second.")
    mbyte_s: float = Field(gt=0, description="MB/s delivered.")


class CheckpointRow(BaseModel):
    """One mode and rank count of a checkpoint benchmark (slowlink.bench.checkpoint)."""

    model_config = _ROW
    mode: str = Field(min_length=1, description="sync or async.")
    ranks: int = Field(ge=1, description="Ranks that saved.")
    blocking_s: float = Field(gt=0, description="Seconds the save blocked training.")
    drain_s: float = Field(ge=0, description="Seconds from then until written (async), 0 for sync.")
    restore_s: float = Field(gt=0, description="Seconds to load it back, page cache evicted.")


class RecordEnv(BaseModel):
    """The parts of a record's environment that readers use; everything else is kept as written."""

    model_config = _ROW
    hostnames: list[str] | None = Field(None, description="Host of every rank.")
    backend: str | None = Field(None, description="gloo or nccl.")


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)
    kind: Literal["collectives", "compute", "train", "storage", "checkpoint"] = Field(
        description="Which benchmark wrote it.")
    created_utc: str | None = Field(None, description="When it was written, ISO 8601 UTC.")
    env: RecordEnv = Field(default_factory=RecordEnv, description="Versions and hosts of the run.")
    config: dict[str, Any] = Field(default_factory=dict, description="The benchmark's options.")


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


RECORD_MODELS: dict[str, type[_Record]] = {
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


def make_record(kind: str, env: dict[str, Any], config: dict[str, Any], rows: list[dict[str, Any]],
                summary: dict[str, Any] | None = None) -> dict[str, Any]:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    rec: dict[str, Any] = {"kind": kind, "created_utc": now, "env": env, "config": config, "rows": rows}
    if summary is not None:
        rec["summary"] = summary
    return rec


def write_record(rec: dict[str, Any], results_dir: Path, label: str) -> Path:
    """Write ``rec`` as ``<dir>/<kind>-<label>-<UTC time>-<host>.json`` and return the path."""
    try:
        results_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BenchError(f"--results ({str(results_dir)!r}) cannot be created: {exc.strerror}") from None
    stamp = rec["created_utc"].replace(":", "").replace("-", "")
    path = results_dir / f"{rec['kind']}-{label}-{stamp}-{rec['env']['host']}.json"
    i = 1
    while path.exists():
        path = path.with_name(f"{path.stem.rsplit('.', 1)[0]}.{i}.json")
        i += 1
    path.write_text(json.dumps(rec, indent=2, default=float) + "\n")
    return path


def _row_kind(rows: list[Any]) -> str:
    """The kind of a bare list of rows (``bench ... --json`` output), by the keys of its first row."""
    first = rows[0] if rows and isinstance(rows[0], dict) else {}
    for kind, key in (("collectives", "busbw_gbyte_s"), ("compute", "tflops"), ("train", "step_time_s"),
                      ("storage", "files_per_s"), ("checkpoint", "blocking_s")):
        if key in first:
            return kind
    return "unknown"


def check_record(data: Any, source: str) -> dict[str, Any]:
    """``data`` (a parsed record, or a bare list of rows) as a record dict, checked against its kind's schema."""
    if isinstance(data, list):
        data = {"kind": _row_kind(data), "env": {}, "config": {}, "rows": data}
    if not isinstance(data, dict) or data.get("kind") not in KINDS:
        kind = data.get("kind") if isinstance(data, dict) else type(data).__name__
        raise SpecError(f"{source}: kind ({kind!r}) must be one of {', '.join(KINDS)}, with a list of rows "
                        "(write one with `slowlink bench ...`)")
    validated(RECORD_MODELS[data["kind"]], data, source, "record")
    return data


def load_record(path: Path | str) -> dict[str, Any]:
    """A record file, a bare list of rows (``bench ... --json`` output) or nccl-tests stdout, as a checked record.

    A NaN in a column no reader uses is kept (a benchmark may write one); the schema refuses it where read.
    """
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"result ({str(p)!r}) does not exist or is not a file")
    text = read_text(p, "result")
    if not text.lstrip().startswith(("{", "[")):
        from slowlink.bench.nccl_tests import looks_like_nccl_tests, parse_nccl_tests, to_record

        if looks_like_nccl_tests(text):  # nccl-tests stdout, read as a collectives record
            return check_record(to_record(parse_nccl_tests(text, str(p)), str(p)), str(p))
    return check_record(parse_text(text, str(p), as_json=True, finite=False), str(p))
