"""The shared bad-input check ``cli_fails`` (tests/conftest.py): it passes only on a clean refusal, and it is
the one copy (the duplicates tool flagged the helper repeated across the CLI tests)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

TESTS = Path(__file__).parents[1]
# The body of the helper each CLI test file used to carry: exit 2, no traceback, then every needle.
COPY = re.compile(r'assert "Traceback" not in (\w+)\.output\n\s+for (\w+) in needles:')


def test_a_clean_refusal_passes_and_returns_the_output(cli_fails: Callable[..., str]) -> None:
    out = cli_fails(["catalog", "switches"], "SECTION ('switches')", "known: gpus")
    assert "is not a catalog section" in out


@pytest.mark.parametrize(("args", "needles"), [
    (["--version"], ()),  # exit 0: not a refusal
    (["catalog", "switches"], ("a needle the message does not hold",)),
])
def test_anything_else_fails(cli_fails: Callable[..., str], args: list[str], needles: tuple[str, ...]) -> None:
    with pytest.raises(AssertionError):
        cli_fails(args, *needles)


def test_no_test_module_carries_its_own_copy() -> None:
    copies = [str(p.relative_to(TESTS)) for p in sorted(TESTS.rglob("*.py"))
              if p.name != "conftest.py" and COPY.search(p.read_text())]
    assert copies == [], f"use the cli_fails fixture (tests/conftest.py) instead of a copy in {copies}"
