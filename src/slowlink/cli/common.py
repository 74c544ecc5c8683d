"""What every subcommand shares: the consoles, clean error exits, and reading a cluster file."""

from __future__ import annotations

import functools
import json
import math
import shutil
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import typer
from rich.console import Console

from slowlink.errors import SlowlinkError, system_refusal

if TYPE_CHECKING:
    from slowlink.assess import Budget

# Columns of a pipe or a CI log: wide enough that no table wraps (nccl-tests-like sweeps are ~170 wide);
# rich would assume 80 and squeeze the headers.
PIPE_WIDTH = 200


class PlainWhenPiped(Console):
    """The one console every command prints to: the terminal's width and rich's boxes on a terminal; into a
    pipe, a file or a CI log, plain text: no colour codes, ASCII table borders, :data:`PIPE_WIDTH` columns.

    With :attr:`csv` set (the root's ``--csv``), every table goes to stdout as CSV (RFC 4180, a header row;
    a table with a title is preceded by ``# title``, and tables are separated by a blank line), as data: one
    number per cell, units in the header, a table of metrics one row per column x metric
    (:mod:`slowlink.report.tabular`); everything else (sentences, advice) goes to stderr, so that stdout is
    tables only."""

    csv = False
    tables_printed = 0

    def print(self, *objects: Any, **kwargs: Any) -> None:
        if self.csv:
            self._print_csv(objects)
            return
        if not self.is_terminal:
            from rich import box
            from rich.table import Table

            for obj in objects:
                if isinstance(obj, Table) and obj.box is not None:
                    obj.box = box.ASCII2
        super().print(*objects, **kwargs)


    def _print_csv(self, objects: Sequence[Any]) -> None:
        import csv

        from rich.table import Table

        from slowlink.report.tabular import data_rows

        for obj in objects:
            if not isinstance(obj, Table):
                err.print(obj)
                continue
            if self.tables_printed:
                sys.stdout.write("\n")
            if obj.title:
                sys.stdout.write(f"# {plain_text(obj.title)}\n")
            writer = csv.writer(sys.stdout, lineterminator="\n")
            headers = [plain_text(c.header) for c in obj.columns]
            columns = [[plain_text(cell) for cell in c.cells] for c in obj.columns]
            writer.writerows(data_rows(headers, columns, getattr(obj, "csv_key", None)))
            self.tables_printed += 1


def plain_text(cell: Any) -> str:
    """A table cell (a string with rich markup, a ``Text``, anything else) as its plain characters."""
    from rich.text import Text

    if isinstance(cell, Text):
        return cell.plain
    return Text.from_markup(cell).plain if isinstance(cell, str) else str(cell)


_tty = sys.stdout.isatty()
# emoji=False: rich would otherwise turn a ``:name:`` in a user's own text (a cluster named ``edge:rocket:1``)
# into an emoji, and load its table of 3,600 codes to look
out = PlainWhenPiped(highlight=False, emoji=False,
                     width=shutil.get_terminal_size((80, 24)).columns if _tty else PIPE_WIDTH)
err = Console(stderr=True, highlight=False, emoji=False, soft_wrap=not sys.stderr.isatty())  # unwrapped in a pipe

P = ParamSpec("P")
R = TypeVar("R")


def clean_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn a :class:`SlowlinkError` into ``error: message`` on stderr and its exit code, no traceback; an OSError
    the machine raised for want of space or permission (its errno, :func:`slowlink.errors.system_refusal`) too."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except SlowlinkError as exc:
            err.print(f"[bold red]error:[/] {exc}", markup=True, soft_wrap=True)
            raise typer.Exit(exc.exit_code) from None
        except OSError as exc:
            refused = system_refusal(exc)
            if refused is None:
                raise
            err.print(f"[bold red]error:[/] {refused}", markup=True, soft_wrap=True)
            raise typer.Exit(refused.exit_code) from None

    return wrapper


# Significant digits of every number slowlink prints as JSON: the models' inputs (bandwidths, latencies, FLOP/s)
# are known to 2-4 digits, so 6 keeps every difference a model can resolve and drops float noise (0.1 + 0.2).
JSON_DIGITS = 6


def rounded(obj: Any, digits: int = JSON_DIGITS) -> Any:
    """``obj`` with every float rounded to ``digits`` significant digits; ints, whole floats (byte counts
    such as 2**30 kept as floats by the models), strings and bools untouched."""
    if isinstance(obj, float):
        return float(f"{obj:.{digits}g}") if math.isfinite(obj) and not obj.is_integer() else obj
    if isinstance(obj, dict):
        return {k: rounded(v, digits) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [rounded(v, digits) for v in obj]
    return obj


def print_json(obj: Any) -> None:
    """JSON on stdout, unwrapped, so that other tools can parse it; floats to :data:`JSON_DIGITS` digits.

    A mapping starts with ``slowlink``: the version that produced it and the spec files it read, as resolved
    after ``--set`` (:func:`slowlink.fileio.inputs_read`), so that a saved result says what produced it."""
    if isinstance(obj, dict):
        from slowlink import __version__
        from slowlink.fileio import inputs_read

        obj = {"slowlink": {"version": __version__, "inputs": inputs_read()}, **obj}
    print(json.dumps(rounded(obj), indent=2, sort_keys=False, default=float))


def parse_budget(tokens: str | None, steps: int | None = None) -> Budget:
    """The run's budget from ``--tokens`` (a count: 15T, 1.5e12) or ``--steps``; an empty one when neither is
    given (the workload's ``training.tokens`` then applies)."""
    from slowlink.assess import Budget
    from slowlink.errors import SpecError
    from slowlink.spec.bounds import STEPS, TOKENS
    from slowlink.units import parse_count

    if tokens is not None and steps is not None:
        raise SpecError(f"--tokens ({tokens!r}) and --steps ({steps}): give one of them")
    try:
        if steps is not None:
            STEPS.check(steps, "--steps")
        return Budget(None if tokens is None else TOKENS.check(parse_count(tokens)), steps)
    except ValueError as exc:
        raise SpecError(str(exc) if tokens is None else f"--tokens ({tokens!r}) {exc}") from None
