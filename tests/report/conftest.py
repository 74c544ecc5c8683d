"""Fixtures of the ``--html`` page tests: a well-formedness parser and headless Chromium.

``parse_page(path)`` checks that a written page is well-formed, self-contained HTML and returns what it
holds (figures and their SVGs, text, ids); ``browse(page, *args)`` runs headless Chromium (Debian's
``chromium``; the test is skipped without it) on the page; ``colours(png)`` counts a screenshot's colours.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

import pytest

VOID = {"meta", "br", "hr", "img", "input", "link", "col", "area", "base", "source", "wbr"}


class Page(HTMLParser):
    """Checks that tags nest and close, and collects figures, their SVGs and external references."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.figures: dict[str, int] = {}  # figure id -> <svg> elements inside
        self.external: list[str] = []
        self.text: list[str] = []
        self.ids: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.append(str(a["id"]))
        for key in ("src", "href", "xlink:href"):
            if (a.get(key) or "").startswith(("http:", "https:", "//")):
                self.external.append(f"{tag} {key}={a[key]}")
        if tag in ("script", "link", "img", "iframe"):
            self.external.append(tag)
        if tag == "figure":
            self.figures[a.get("id") or "?"] = 0
        if tag == "svg" and "figure" in self.stack:
            self.figures[list(self.figures)[-1]] += 1
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in VOID:  # a self-closing SVG element: open and close it at once
            self.handle_starttag(tag, attrs)
            self.stack.pop()

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
            return
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(path: Path) -> Page:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    page = Page()
    page.feed(text)
    page.close()
    assert not page.errors, page.errors[:5]
    assert page.stack == [], f"unclosed: {page.stack}"
    assert not page.external, f"the page fetches {page.external}"
    assert not re.search(r"url\((?!#)", text), "a url() that is not a reference inside the page"
    assert len(page.ids) == len(set(page.ids)), "duplicate ids (two figures' clip paths would clash)"
    return page


@pytest.fixture
def parse_page() -> Callable[[Path], Page]:
    """Parse a written page and assert it is well-formed, self-contained HTML."""
    return _parse


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    pytest.skip("headless Chromium not installed (apt-get install chromium; .ci/run installs it)")


@pytest.fixture
def browse(tmp_path: Path) -> Callable[..., str]:
    """Run headless Chromium on a page with extra arguments (``--dump-dom``, ``--screenshot=...``): its stdout."""
    exe = _chromium()

    def run(page: Path, *args: str) -> str:
        cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=8000", *args,
               page.resolve().as_uri()]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        assert res.returncode == 0, res.stderr[-2000:]
        return res.stdout

    return run


@pytest.fixture
def colours() -> Callable[[Path], int]:
    """Distinct colours of a PNG screenshot (a blank page has one or two)."""

    def count(png: Path) -> int:
        import matplotlib.image
        import numpy as np

        img = matplotlib.image.imread(str(png))
        assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100
        return len(np.unique(img.reshape(-1, img.shape[2]), axis=0))

    return count
