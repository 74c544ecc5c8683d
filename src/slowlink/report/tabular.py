"""Tables as data (``--csv``): one number per cell, units in the header, no thousands separators, percent signs,
pairs or notes inside a cell (issue 39: the CSV cells were display text: ``"1,683,202"``, ``40.0%``,
``2.218 / 2.273``, ``0.00673 (2048)``).

A display table is read series by series (a column; in a table of metrics, a metric's row): when every cell
of a series that holds a value has the same shape, the series becomes data of that shape:

  ``1,683,202``           -> ``1683202``
  ``40.0%``               -> ``0.4``, its label gaining `` (fraction)``
  ``2.218 / 2.273``       -> two series, ``tp exposed / total (s)`` -> ``tp exposed (s)`` and ``tp total (s)``
  ``0.00673 (2048)``      -> two series, ``read demand (GB/s, 1 GB/s/GPU rule)`` -> ``read demand (GB/s)`` and
                             ``1 GB/s/GPU rule (GB/s)``
  ``-``                   -> an empty cell (no value)

A series of mixed shapes (names, words) stays text. A table of metrics (its first header empty: one row per
metric, one column per cluster or case) is written tidy: one row per column x metric.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.table import Table

_NUM = r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?"
_NUMBER = re.compile(rf"^({_NUM})$")
_PERCENT = re.compile(rf"^({_NUM})\s*%$")
_PAIR = re.compile(rf"^({_NUM})\s*/\s*({_NUM})$")
_NOTE = re.compile(rf"^({_NUM})\s*\(({_NUM})\)$")
_UNIT = re.compile(r"^(.*?)\s*\(([^()]*)\)\s*$")
NO_VALUE = ("", "-")


def _clean(number: str) -> str:
    return number.replace(",", "")


def _is(pattern: re.Pattern[str], cell: str) -> bool:
    m = pattern.match(cell)
    return m is not None and all(g and g not in "+-." for g in m.groups())


def series(label: str, cells: list[str]) -> list[tuple[str, list[str]]]:
    """One display series as data series: ``[(label, values)]`` (two for a pair or a value with a note)."""
    cells = [c.strip() for c in cells]
    present = [c for c in cells if c not in NO_VALUE]
    if not present:
        return [(label, ["" for _ in cells])]

    def each(pattern: re.Pattern[str], group: int, scale: float = 1.0) -> list[str]:
        out = []
        for c in cells:
            m = pattern.match(c) if c not in NO_VALUE else None
            out.append("" if m is None else (_clean(m.group(group)) if scale == 1.0 else
                                             f"{float(_clean(m.group(group))) * scale:.12g}"))
        return out

    if all(_is(_NUMBER, c) for c in present):
        return [(label, each(_NUMBER, 1))]
    if all(_is(_PERCENT, c) for c in present):
        return [(f"{label} (fraction)", each(_PERCENT, 1, 0.01))]
    if all(_is(_PAIR, c) for c in present):
        first, second = _pair_labels(label)
        return [(first, each(_PAIR, 1)), (second, each(_PAIR, 2))]
    if all(_is(_NOTE, c) for c in present):
        first, second = _note_labels(label)
        return [(first, each(_NOTE, 1)), (second, each(_NOTE, 2))]
    return [(label, ["" if c in NO_VALUE else c for c in cells])]


def _pair_labels(label: str) -> tuple[str, str]:
    """``tp exposed / total (s)`` -> (``tp exposed (s)``, ``tp total (s)``): the second part takes the first's
    leading words and both keep the unit."""
    m = _UNIT.match(label)
    body, unit = (m.group(1), f" ({m.group(2)})") if m else (label, "")
    if " / " not in body:
        return f"{label} [1]", f"{label} [2]"
    left, right = body.split(" / ", 1)
    lead = left.rsplit(" ", 1)[0] + " " if " " in left.strip() else ""
    return f"{left}{unit}", f"{lead}{right}{unit}"


def _note_labels(label: str) -> tuple[str, str]:
    """``read demand (GB/s, 1 GB/s/GPU rule)`` -> (``read demand (GB/s)``, ``1 GB/s/GPU rule (GB/s)``)."""
    m = _UNIT.match(label)
    if m and ", " in m.group(2):
        unit, note = m.group(2).split(", ", 1)
        return f"{m.group(1)} ({unit})", f"{note} ({unit})"
    return label, f"{label} [in parentheses]"


def data_rows(headers: list[str], columns: list[list[str]], key: str | None = None) -> list[list[str]]:
    """A display table (headers and its columns of plain cells) as CSV rows, header first: column by column, or
    tidy (``key``, ``metric``, ``value``) for a table of metrics (first header empty, or a ``key`` given by
    :func:`tidy_key`)."""
    if len(headers) > 1 and (key is not None or headers[0].strip() == ""):
        rows = [[key or "column", "metric", "value"]]
        for r, label in enumerate(columns[0]):
            for name, values in series(label.strip(), [col[r] for col in columns[1:]]):
                rows += [[h, name, v] for h, v in zip(headers[1:], values, strict=True)]
        return rows
    out_headers: list[str] = []
    out_columns: list[list[str]] = []
    for h, col in zip(headers, columns, strict=True):
        for name, values in series(h, col):
            out_headers.append(name)
            out_columns.append(values)
    return [out_headers, *[list(r) for r in zip(*out_columns, strict=True)]]


def tidy_key(table: Table, key: str) -> Table:
    """Name the column that a table of metrics' tidy CSV rows are keyed by (``cluster`` for ``plan``)."""
    vars(table)["csv_key"] = key
    return table
