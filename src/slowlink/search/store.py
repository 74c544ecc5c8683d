"""Resumable sweeps: every finished chunk of a search is kept as a JSON file in a folder, so a rerun after an
interruption evaluates only the chunks that are missing.

The folder belongs to one space: ``space.txt`` holds the space's fingerprint (a SHA-256 of its resolved
designs, layouts, workload, prices, token budget and chunking); a folder written for another space is refused
rather than mixed in. Chunk files are written whole, then renamed, so an interrupted write leaves no half file.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path

from slowlink.errors import SpecError
from slowlink.search.evaluate import Point
from slowlink.search.space import Space

FINGERPRINT_FILE = "space.txt"


POINT_SCHEMA = 2  # what a point holds and how it is priced (rule ids, ETTR, data stall): older chunks differ


def fingerprint(space: Space, parts: list[list[int]]) -> str:
    """A stable digest of everything that decides a search's points: the space resolved (designs, layouts,
    workload, prices, budget and the storage: and reliability: every design shares) and the point schema."""
    text = repr((space.hardware, space.layouts, space.workload, space.prices, space.tokens,
                 sorted(space.shared.items()), POINT_SCHEMA, parts))
    return hashlib.sha256(text.encode()).hexdigest()


class ChunkStore:
    """Finished chunks of one space in ``folder`` (module docstring)."""

    def __init__(self, folder: Path, space: Space, parts: list[list[int]]) -> None:
        if folder.exists() and not folder.is_dir():
            raise SpecError(f"--resume ({str(folder)!r}) is a file: give a folder")
        folder.mkdir(parents=True, exist_ok=True)
        digest = fingerprint(space, parts)
        marker = folder / FINGERPRINT_FILE
        if marker.exists() and marker.read_text().strip() != digest:
            raise SpecError(f"--resume ({str(folder)!r}) holds chunks of another search space: give a new folder "
                            "(or empty this one)")
        marker.write_text(digest + "\n")
        self.folder = folder

    def _path(self, part: list[int]) -> Path:
        return self.folder / f"chunk-{part[0]}-{part[-1]}.json"

    def load(self, part: list[int]) -> list[Point] | None:
        """The points of a finished chunk, or None when it has not been kept."""
        path = self._path(part)
        if not path.exists():
            return None
        return [Point(**row) for row in json.loads(path.read_text())]

    def save(self, part: list[int], points: list[Point]) -> None:
        path = self._path(part)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps([asdict(p) for p in points]))
        os.replace(tmp, path)
