"""Figure outputs: one suffix list and one missing-extra message for every --plot/--heatmap."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from slowlink.errors import SlowlinkError, SpecError
from slowlink.report.figure import SUFFIXES, check_figure_output


def test_suffix_is_checked_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"--heatmap \('.*out.jpg'\) must end in .png, .svg, .pdf"):
        check_figure_output(tmp_path / "out.jpg", "--heatmap")
    for suffix in SUFFIXES:
        check_figure_output(tmp_path / f"out{suffix}", "--plot")


def test_missing_matplotlib_names_the_flag_and_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    with pytest.raises(SlowlinkError, match=r"--plot needs matplotlib, .*pip install 'slowlink\[plot\]'"):
        check_figure_output(tmp_path / "out.png", "--plot")
