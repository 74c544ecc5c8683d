"""A directory of files read as webdataset samples: files grouped by key, every file a loader could not use named.

webdataset's convention (``webdataset.tariterators.base_plus_ext`` and ``group_by_keys``, webdataset 1.0): a
member ``dir/img00001.seg.png`` belongs to the sample with key ``dir/img00001`` (the path up to the first dot
of its last component) under the extension ``seg.png``; a reader groups *consecutive* members of one key, lowercases
the extension, drops a member with no extension and skips names matching ``__*__`` (its ``skip_meta``). So
here a sample is every file of one key, its parts sorted by extension, the samples sorted by the key's bytes
(the same order on every machine and locale), and every file a reader would lose or mix up is listed as
skipped with its reason instead of being written.

Names cross into ``index.json`` reversibly: a name that is valid UTF-8 as a string, any other as
``{"hex": "<the name's bytes>"}`` (:func:`name_json`, :func:`name_bytes`).
"""

from __future__ import annotations

import os
import re
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path

from slowlink.errors import SpecError, field_error

# webdataset.tariterators.base_plus_ext and tar_file_iterator's skip_meta, webdataset 1.0.2
_KEY_EXT = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")
_META = re.compile(r"__[^/]*__($|/)")


@dataclass(frozen=True)
class SourceFile:
    """One file of a sample: its path under SRC (``/``-separated), its sample key and extension, its size."""

    rel: str
    key: str
    ext: str
    size_bytes: int

    @property
    def member(self) -> str:
        """Its tar member name, ``KEY.EXT``: the path it had under SRC."""
        return f"{self.key}.{self.ext}"


@dataclass(frozen=True)
class Sample:
    """Every file of one key, sorted by extension (the order webdataset's TarWriter writes them)."""

    key: str
    parts: tuple[SourceFile, ...]

    @property
    def size_bytes(self) -> int:
        return sum(p.size_bytes for p in self.parts)


@dataclass(frozen=True)
class Skipped:
    """A file (or a folder, ending in ``/``) under SRC that no shard holds, and why."""

    rel: str
    reason: str

    def to_json(self) -> dict[str, object]:
        return {"name": name_json(self.rel), "reason": self.reason}


@dataclass(frozen=True)
class Source:
    """What SRC holds as samples, and what it holds that no sample takes."""

    samples: tuple[Sample, ...]
    skipped: tuple[Skipped, ...]

    @property
    def files(self) -> list[SourceFile]:
        """Every file of every sample, in the order they are written."""
        return [p for s in self.samples for p in s.parts]


def name_json(rel: str) -> str | dict[str, str]:
    """A path as JSON: itself when it is UTF-8, else its bytes in hex (module docstring)."""
    raw = os.fsencode(rel)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return {"hex": raw.hex()}


def name_bytes(entry: str | dict[str, str]) -> bytes:
    """The bytes of a name stored by :func:`name_json`."""
    return bytes.fromhex(entry["hex"]) if isinstance(entry, dict) else entry.encode("utf-8")


def _fits_ustar(member: str) -> bool:
    """True when ``member`` fits a ustar header (name 100 bytes, prefix 155, split at a ``/``)."""
    try:
        tarfile.TarInfo(member).tobuf(tarfile.USTAR_FORMAT, "utf-8", "surrogateescape")
    except ValueError:
        return False
    return True


def name_problem(rel: str) -> str | None:
    """Why a webdataset reader could not use a file of this name, or None when it can."""
    m = _KEY_EXT.match(rel)
    if m is None or not m.group(2):
        return "has no extension: a webdataset reader drops a member without one"
    if m.group(2).startswith("_"):
        return "its extension starts with '_': webdataset's TarWriter drops it"
    if _META.match(rel):
        return "matches __*__: a webdataset reader skips it as metadata"
    if not _fits_ustar(rel):
        return "is too long for a tar member (ustar: 100-byte name, 155-byte folder)"
    return None


def _entry_kind(path: Path, src: Path) -> tuple[str, str | None]:
    """('file' | 'dir' | 'skip', the reason when skipped) of one directory entry, symlinks resolved inside SRC."""
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode):
        target = Path(os.path.realpath(path))
        if not target.exists():
            return "skip", f"is a broken symlink (to {os.readlink(path)!r})"
        if target != src and src not in target.parents:
            return "skip", f"is a symlink to {str(target)!r}, outside SRC"
        if target.is_dir():
            return "skip", "is a symlinked folder (not followed, so no file is read twice)"
        st = target.stat()
    if stat.S_ISDIR(st.st_mode):
        return "dir", None
    if not stat.S_ISREG(st.st_mode):
        kind = "a fifo" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "a device"
        return "skip", f"is {kind}, not a regular file"
    return "file", None


def _walk(src: Path, real: Path, rel: str, found: list[tuple[str, int]], skipped: list[Skipped]) -> None:
    with os.scandir(src / rel if rel else src) as it:
        entries = sorted(it, key=lambda e: os.fsencode(e.name))
    for e in entries:
        r = f"{rel}/{e.name}" if rel else e.name
        if e.name.startswith("."):
            skipped.append(Skipped(r + ("/" if e.is_dir(follow_symlinks=False) else ""), "is hidden"))
            continue
        kind, why = _entry_kind(Path(e.path), real)
        if kind == "dir":
            _walk(src, real, r, found, skipped)
        elif why is not None:
            skipped.append(Skipped(r, why))
        elif not os.access(e.path, os.R_OK):
            raise SpecError(field_error("SRC", e.path, "cannot be read (permission denied): fix its mode or move "
                                        "it out of SRC"))
        else:
            found.append((r, os.stat(e.path).st_size))


def scan(src: Path) -> Source:
    """SRC's samples by webdataset's convention and the files it skips (module docstring); errors name SRC."""
    if not src.exists():
        raise SpecError(field_error("SRC", str(src), "does not exist: give a directory of files"))
    if not src.is_dir():
        raise SpecError(field_error("SRC", str(src), "is not a directory"))
    found: list[tuple[str, int]] = []
    skipped: list[Skipped] = []
    _walk(src, src.resolve(), "", found, skipped)
    groups: dict[str, dict[str, SourceFile]] = {}
    for rel, size in found:
        why = name_problem(rel)
        if why is not None:
            skipped.append(Skipped(rel, why))
            continue
        key, ext = _KEY_EXT.match(rel).groups()  # type: ignore[union-attr]
        parts = groups.setdefault(key, {})
        if ext.lower() in parts:
            skipped.append(Skipped(rel, f"has the extension of {parts[ext.lower()].rel!r} in another case: a "
                                        "webdataset reader lowercases extensions"))
            continue
        parts[ext.lower()] = SourceFile(rel, key, ext, size)
    samples = tuple(Sample(k, tuple(sorted(groups[k].values(), key=lambda f: f.ext)))
                    for k in sorted(groups, key=os.fsencode))
    if not samples:
        raise SpecError(field_error("SRC", str(src), f"holds no files a webdataset reader could use ({len(skipped)} "
                                    "skipped: hidden names, no extension, not regular files)"))
    return Source(samples, tuple(sorted(skipped, key=lambda s: os.fsencode(s.rel))))
