"""A checkpoint's bytes proven, not only its save: a manifest of every file's size and SHA-256, written before the
checkpoint is marked committed, and the checks that read it back.

``COMMITTED`` proves that a save finished; ``MANIFEST.json`` proves which bytes it finished with. A directory is
*intact* when every file the manifest lists exists with its size and digest. A torch.distributed.checkpoint
directory without a manifest (one a user's job wrote) can still be checked for structure: its ``.metadata``
loads, and every ``.distcp`` file it names exists and is long enough for every item stored in it (a truncated
file fails here, flipped bytes do not: only a digest catches those, and the result says so).

Each problem carries a ``rule`` (``manifest``, ``missing``, ``size``, ``sha256``, ``metadata``, ``extent``) that
code reads instead of its text.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

MANIFEST = "MANIFEST.json"
COMMITTED = "COMMITTED"
HASH = "sha256"
CHUNK_BYTES = 4 * 2**20


@dataclass(frozen=True)
class FileDigest:
    """One file of a checkpoint: its name in the directory, size and SHA-256."""

    name: str
    size_bytes: int
    sha256: str


@dataclass(frozen=True)
class Problem:
    """One reason a checkpoint is not intact: the file, the rule it breaks, and what was seen."""

    file: str
    rule: str
    detail: str

    def __str__(self) -> str:
        return f"{self.file}: {self.detail}"


@dataclass(frozen=True)
class Verification:
    """What :func:`verify` found: problems (none: intact), whether bytes were proven by digests, and its cost."""

    directory: Path
    digests: bool
    files: int
    hashed_bytes: int
    seconds: float
    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, object]:
        return {"directory": str(self.directory), "ok": self.ok, "digests": self.digests, "files": self.files,
                "hashed_bytes": self.hashed_bytes, "seconds": self.seconds,
                "problems": [{"file": p.file, "rule": p.rule, "detail": p.detail} for p in self.problems]}


def digest_file(path: Path) -> FileDigest:
    """Size and SHA-256 of one file, read in chunks of :data:`CHUNK_BYTES`."""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK_BYTES):
            h.update(chunk)
            size += len(chunk)
    return FileDigest(path.name, size, h.hexdigest())


def payload(directory: Path) -> list[str]:
    """The files a checkpoint consists of: every regular file but its marker and its manifest, sorted."""
    skip = {MANIFEST, COMMITTED}
    return sorted(p.name for p in directory.iterdir()
                  if p.is_file() and p.name not in skip and not p.name.startswith((f"{COMMITTED}.", f"{MANIFEST}.")))


def rank_files(directory: Path, rank: int) -> list[str]:
    """The files DCP's FileSystemWriter wrote from ``rank`` (``__RANK_N.distcp``), and ``.metadata`` on rank 0."""
    mine = [n for n in payload(directory) if n.startswith(f"__{rank}_")]
    return [*mine, ".metadata"] if rank == 0 and (directory / ".metadata").exists() else mine


def write_manifest(directory: Path, digests: list[FileDigest]) -> Path:
    """The manifest, atomically (temporary, fsync, rename), before the checkpoint is committed."""
    doc = {"hash": HASH, "files": [{"name": d.name, "size_bytes": d.size_bytes, HASH: d.sha256}
                                   for d in sorted(digests, key=lambda d: d.name)]}
    final, tmp = directory / MANIFEST, directory / f"{MANIFEST}.tmp"
    with tmp.open("w") as fh:
        fh.write(json.dumps(doc, indent=1))
        fh.flush()
        os.fsync(fh.fileno())
    tmp.rename(final)
    return final


def read_manifest(directory: Path) -> list[FileDigest] | None:
    """The manifest's files, or None when there is none or it cannot be read."""
    try:
        doc = json.loads((directory / MANIFEST).read_text())
        return [FileDigest(str(f["name"]), int(f["size_bytes"]), str(f[HASH])) for f in doc["files"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def check_digests(directory: Path, want: list[FileDigest]) -> tuple[list[Problem], int]:
    """Problems of the files ``want`` lists, and the bytes hashed to find them."""
    problems, hashed = [], 0
    for d in want:
        path = directory / d.name
        if not path.is_file():
            problems.append(Problem(d.name, "missing", "is missing"))
            continue
        size = path.stat().st_size
        if size != d.size_bytes:
            problems.append(Problem(d.name, "size", f"has {size} bytes, the manifest {d.size_bytes}: truncated "
                                    "or overwritten"))
            continue
        got = digest_file(path)
        hashed += got.size_bytes
        if got.sha256 != d.sha256:
            problems.append(Problem(d.name, "sha256", f"SHA-256 {got.sha256[:12]}... differs from the manifest's "
                                    f"{d.sha256[:12]}...: its bytes changed after the save"))
    return problems, hashed


def check_structure(directory: Path) -> list[Problem]:
    """A DCP directory without digests: ``.metadata`` loads and every file it names holds every item's extent."""
    from torch.distributed.checkpoint.filesystem import FileSystemReader

    try:
        meta = FileSystemReader(str(directory)).read_metadata()
    except Exception as exc:  # any failure to read it means the same: no usable metadata
        return [Problem(".metadata", "metadata", f"cannot be read as DCP metadata ({type(exc).__name__})")]
    need: dict[str, int] = {}
    for info in (meta.storage_data or {}).values():
        need[info.relative_path] = max(need.get(info.relative_path, 0), info.offset + info.length)
    problems = []
    for name, end in sorted(need.items()):
        path = directory / name
        if not path.is_file():
            problems.append(Problem(name, "missing", "is named by .metadata but missing"))
        elif path.stat().st_size < end:
            problems.append(Problem(name, "extent", f"has {path.stat().st_size} bytes, .metadata needs {end}: "
                                    "truncated"))
    return problems


def verify(directory: Path, share: tuple[int, int] = (0, 1)) -> Verification:
    """Check a checkpoint directory (module docstring). ``share = (i, n)`` checks only every n-th file of the
    manifest from the i-th, so that n ranks verify one checkpoint together."""
    t0 = time.perf_counter()
    want = read_manifest(directory)
    if want is None:
        if (directory / MANIFEST).exists():
            problems = [Problem(MANIFEST, "manifest", "cannot be read")]
        else:
            problems = check_structure(directory) if share[0] == 0 else []
        return Verification(directory, False, 0, 0, time.perf_counter() - t0, tuple(problems))
    mine = want[share[0]::share[1]]
    problems, hashed = check_digests(directory, mine)
    return Verification(directory, True, len(mine), hashed, time.perf_counter() - t0, tuple(problems))
