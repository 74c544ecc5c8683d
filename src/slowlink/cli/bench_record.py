"""The record every ``slowlink bench`` command ends with: built, written unless told not to, and returned
(shared by cli/bench.py and cli/bench_storage.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from slowlink.cli.common import err


def save_record(kind: str, label: str, result: dict[str, Any], config: dict[str, Any], backend: str,
                cluster: Path | None, results: Path, no_results: bool,
                summary: dict[str, Any] | None = None) -> dict[str, Any]:
    """Build the record, write it unless ``no_results``, and return it."""
    from slowlink.bench.record import environment, make_record, write_record

    rec = make_record(kind, environment(backend, result.get("hostnames"), cluster), config, result["rows"],
                      summary)
    if not no_results:
        err.print(f"record: {write_record(rec, results, label)}")
    return rec
