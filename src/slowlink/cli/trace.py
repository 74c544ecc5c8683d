"""CLI of the trace area: ``slowlink read kineto`` (registered under ``read`` by :mod:`slowlink.cli.observe`)."""

from __future__ import annotations

from pathlib import Path

import typer

from slowlink.cli.common import clean_errors, out, print_json

_TRACES = typer.Argument(..., help="PyTorch profiler traces (.json or .json.gz, one per rank) or directories of them.")


@clean_errors
def read_kineto(paths: list[Path] = _TRACES,
                as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """PyTorch profiler traces: per rank compute, communication, memory and idle time and their overlap (as HTA
    reads them), per collective its calls, bytes, time and busbw."""
    from slowlink.report.trace import classes_line, collectives_table, ranks_table, sentence, shapes_lines
    from slowlink.trace.kineto import read_kineto as read

    summary = read(paths)
    if as_json:
        print_json(summary.to_json())
        return
    out.print(ranks_table(summary))
    if summary.collectives:
        out.print(collectives_table(summary))
    for r in summary.ranks:
        out.print(sentence(r), markup=False)
        if classes_line(r):
            out.print(classes_line(r), markup=False)
        for line in shapes_lines(r):
            out.print(line, markup=False)
