"""Signs of life for work that takes seconds: one rich bar on stderr (a spinner when the total is unknown),
drawn only when stderr is a terminal and erased when done, so that pipes, JSON and CSV never see it.

Library code never draws: it takes a :data:`OnStep` callback (``on_step("all_reduce")`` as each phase begins)
and the command passes :meth:`Steps.begin` of the bar it opened here. This module imports rich only when a
bar is actually drawn."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from rich.console import Console

T = TypeVar("T")

OnStep = Callable[[str], None]
"""What a long library function calls as each of its phases begins, with the phase's name."""


class Steps:
    """The handle of one bar: :meth:`advance` counts finished items; :meth:`begin` names the phase that starts
    now and counts the one before it as finished. :attr:`done` is the count so far, drawn or not."""

    def __init__(self, bar: Any = None, task: Any = None) -> None:
        self._bar, self._task = bar, task
        self.done = 0
        self._open = False

    def advance(self, n: int = 1) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.advance(self._task, n)

    def begin(self, what: str) -> None:
        if self._open:
            self.advance()
        self._open = True
        if self._bar is not None:
            self._bar.update(self._task, description=what)

    def finish(self) -> None:
        """Count the phase that is still open, if any."""
        if self._open:
            self._open = False
            self.advance()


def _draws(console: Console | None, enabled: bool) -> bool:
    if not enabled:
        return False
    if console is not None:
        return console.is_terminal
    isatty = getattr(sys.stderr, "isatty", None)  # not rich's is_terminal: FORCE_COLOR must not draw into a pipe
    return bool(isatty and isatty())


@contextmanager
def progress(what: str, total: int | None = None, *, enabled: bool = True,
             console: Console | None = None) -> Iterator[Steps]:
    """A bar of ``total`` items labelled ``what`` (a spinner and the elapsed time when ``total`` is None) for
    the ``with`` block; ``console`` replaces stderr (tests). Off a terminal, or not ``enabled``, the handle
    only counts."""
    if not _draws(console, enabled):
        steps = Steps()
        yield steps
        steps.finish()
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns: list[Any] = [SpinnerColumn(), TextColumn("{task.description}")]
    if total is not None:
        columns += [BarColumn(), MofNCompleteColumn()]
    console = console or Console(stderr=True, force_terminal=True)  # _draws has asked the stream itself
    with Progress(*columns, TimeElapsedColumn(), console=console, transient=True) as bar:
        steps = Steps(bar, bar.add_task(what, total=total))
        yield steps
        steps.finish()


def track(items: Sequence[T], what: str, *, console: Console | None = None) -> Iterator[T]:
    """``items`` one by one under a bar that advances after each; no bar for fewer than two items."""
    with progress(what, len(items), enabled=len(items) > 1, console=console) as steps:
        for item in items:
            yield item
            steps.advance()


def status(what: str, *, console: Console | None = None) -> Any:
    """A spinner labelled ``what`` for one long call whose length nothing can count (a context manager)."""
    return progress(what, None, console=console)
