"""What writing a figure file needs: matplotlib (slowlink's ``plot`` extra) and a suffix its backends write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from slowlink.errors import SlowlinkError
from slowlink.fileio import check_output

SUFFIXES = (".png", ".svg", ".pdf")  # formats matplotlib's Agg/vector backends write


def require_matplotlib(flag: str) -> Any:
    """The matplotlib module, or the error that names ``flag`` and how to install the extra."""
    try:
        import matplotlib
    except ImportError:
        raise SlowlinkError(f"{flag} needs matplotlib, slowlink's 'plot' extra: pip install 'slowlink[plot]'") from None
    return matplotlib


def check_figure_output(path: Path, flag: str) -> None:
    """``flag``'s file can be written (folder, suffix) and matplotlib is installed: checked before any work."""
    check_output(path, flag, SUFFIXES)
    require_matplotlib(flag)
