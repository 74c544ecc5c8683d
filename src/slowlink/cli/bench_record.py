"""The record every ``slowlink bench`` command ends with: built, written unless told not to, and returned
(shared by cli/bench.py and cli/bench_storage.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from slowlink.cli.common import err

if TYPE_CHECKING:
    from slowlink.bench.record import Record

# Every bench command's --results: no record is written unless a folder is given.
RESULTS = typer.Option(None, "--results", help="Write the run's JSON record into this folder (for compare, "
                       "calibrate and the exporter); none is written unless asked.")


def save_record(kind: str, label: str, rows: list[dict[str, Any]], hostnames: list[str] | None,
                config: dict[str, Any], backend: str, cluster: Path | None, results: Path | None, no_results: bool,
                summary: dict[str, Any] | None = None) -> Record:
    """Build the record, write it into ``results`` when a folder is given (and not ``no_results``), and return
    it; nothing is written unasked (``./results/`` would appear in whatever folder a bench ran from)."""
    from slowlink.bench.record import make_record, write_record

    rec = make_record(kind, rows, config, backend, hostnames, cluster, summary)
    if results is not None and not no_results:
        err.print(f"record: {write_record(rec, results, label)}")
    return rec
