"""``slowlink baseline save``, ``slowlink compare`` and ``slowlink calibrate``; plus bench compute/train."""

from __future__ import annotations

import typer


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    """Register the result-handling commands on the root app and the extra benchmarks on ``bench``."""
