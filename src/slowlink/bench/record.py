"""Result records: every benchmark writes one JSON file with its rows and the environment it ran in.

A record is ``{"kind", "created_utc", "env", "config", "rows"}``; ``kind`` is collectives, compute or
train. The environment names the torch, backend, CUDA, NCCL and driver versions, the hosts of every
rank and, when given, the cluster file (path, name, sha256), so that two records can be told apart.
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
from typing import Any

from slowlink import __version__
from slowlink.errors import BenchError, SpecError

KINDS = ("collectives", "compute", "train")


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


def load_record(path: Path | str) -> dict[str, Any]:
    """A record file, or a bare list of rows (``bench ... --json`` output), as a record."""
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"result ({str(p)!r}) does not exist or is not a file")
    try:
        data = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise SpecError(f"result ({str(p)!r}) is not a JSON result: {exc}") from None
    if isinstance(data, list):
        kind = "collectives" if data and "busbw_gbyte_s" in data[0] else "unknown"
        data = {"kind": kind, "env": {}, "config": {}, "rows": data}
    if not isinstance(data, dict) or data.get("kind") not in KINDS or not isinstance(data.get("rows"), list):
        raise SpecError(f"result ({str(p)!r}): kind must be one of {', '.join(KINDS)} with a list of rows "
                        "(write one with `slowlink bench ...`)")
    return data
