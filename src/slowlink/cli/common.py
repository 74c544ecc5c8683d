"""What every subcommand shares: the consoles, clean error exits, and reading a cluster file."""

from __future__ import annotations

import functools
import json
import shutil
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ParamSpec, TypeVar

import typer
from rich.console import Console

from slowlink.errors import SlowlinkError

# A terminal's own width; 120 columns into a pipe or a CI log (rich would assume 80 and squeeze the headers).
out = Console(highlight=False, width=shutil.get_terminal_size((120, 24)).columns)
err = Console(stderr=True, highlight=False)

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


def clean_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn a :class:`SlowlinkError` into ``error: message`` on stderr and its exit code, no traceback."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except SlowlinkError as exc:
            err.print(f"[bold red]error:[/] {exc}", markup=True, soft_wrap=True)
            raise typer.Exit(exc.exit_code) from None

    return wrapper


def print_json(obj: Any) -> None:
    """JSON on stdout, unwrapped, so that other tools can parse it."""
    print(json.dumps(obj, indent=2, sort_keys=False, default=float))


def progress(items: Sequence[T], what: str) -> Iterator[T]:
    """``items`` one by one, with a progress bar on stderr while they run: only on a terminal and for more
    than one item, and erased at the end, so pipes, JSON and tests see nothing of it."""
    from rich.progress import track

    yield from track(items, description=what, console=err, transient=True,
                     disable=len(items) < 2 or not err.is_terminal)
