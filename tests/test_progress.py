"""The one progress facility: drawn on a terminal only, erased, counting every item and phase."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from slowlink.progress import progress, status, track


def _terminal() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, force_terminal=True, width=100), buf


def test_off_a_terminal_nothing_is_drawn_but_items_are_counted(capsys: pytest.CaptureFixture[str]) -> None:
    with progress("sweep", 4) as steps:
        for _ in range(4):
            steps.advance()
    assert steps.done == 4
    assert capsys.readouterr().err == ""


def test_force_color_does_not_draw_into_a_pipe(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich would call a pipe a terminal; the facility asks the stream
    assert list(track([1, 2, 3], "sweep")) == [1, 2, 3]
    assert capsys.readouterr().err == ""


def test_on_a_terminal_the_bar_reaches_n_of_n() -> None:
    console, buf = _terminal()
    assert list(track(["a", "b", "c"], "three sizes", console=console)) == ["a", "b", "c"]
    shown = buf.getvalue()
    assert "three sizes" in shown and "3/3" in shown and "4/3" not in shown


def test_one_item_draws_no_bar() -> None:
    console, buf = _terminal()
    assert list(track(["only"], "one", console=console)) == ["only"]
    assert buf.getvalue() == ""


def test_begin_counts_the_phase_before_and_the_last_at_exit() -> None:
    console, buf = _terminal()
    with progress("validate emulated", 3, console=console) as steps:
        for phase in ("bring-up", "all_reduce", "tear-down"):
            steps.begin(phase)
        assert steps.done == 2  # tear-down still running
    assert steps.done == 3
    assert "tear-down" in buf.getvalue() and "3/3" in buf.getvalue()


def test_a_spinner_shows_its_label_without_a_count() -> None:
    console, buf = _terminal()
    with status("emulate up", console=console):
        pass
    assert "emulate up" in buf.getvalue() and "/" not in buf.getvalue()
