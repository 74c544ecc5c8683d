"""Rendering of the hardware catalog (``slowlink catalog``): one table per section, the source last."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from slowlink.report.tabular import tidy_key

_TITLES = {"gpus": "GPUs", "scale_up": "scale-up links", "transports": "scale-out transports"}
MAX_WIDTH = 120  # a table wider than this is split into several, one column group each (issue 39)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _width(entries: dict[str, dict[str, Any]], keys: list[str], by_entry: bool) -> int:
    """Characters a table needs: one row per entry (``by_entry`` False) or one column per entry (each column its
    widest cell, a space either side and the border on its left; one border closes the row)."""
    cells = [[name, *(_cell(e.get(k)) for k in keys)] for name, e in entries.items()]
    header = ["name", *keys]
    columns = list(zip(header, *cells, strict=True)) if not by_entry else [("key", *keys), *cells]
    return sum(max(len(c) for c in col) + 3 for col in columns) + 1


def catalog_tables(section: str, entries: dict[str, dict[str, Any]], sources: bool = True) -> list[Table]:
    """A section's entries with the file's keys (and units), in the order the entries write them (one row per
    entry, or one column per entry when that is narrower), then where each entry's figures are from in a table
    of its own: the GPU section (a dozen keys and long sources) was 200 columns wide (issue 39)."""
    keys: list[str] = []
    for entry in entries.values():
        keys += [k for k in entry if k != "source" and k not in keys]
    title = f"catalog: {_TITLES.get(section, section)} ({len(entries)})"
    if _width(entries, keys, by_entry=False) <= _width(entries, keys, by_entry=True):
        table = tidy_key(Table(title=title), "name")
        table.add_column("name", no_wrap=True)
        for k in keys:
            table.add_column(k, justify="right")
        for name, entry in entries.items():
            table.add_row(name, *(_cell(entry.get(k)) for k in keys))
        tables = [table]
    else:
        tables = [_by_key(title, group, keys) for group in _groups(entries, keys)]
    if not sources:
        return tables
    src = Table(title=f"{title}: sources")
    src.add_column("name", no_wrap=True)
    src.add_column("source", max_width=100)  # long sources wrap inside the cell
    for name, entry in entries.items():
        src.add_row(name, str(entry.get("source", "")))
    return [*tables, src]


def _groups(entries: dict[str, dict[str, Any]], keys: list[str]) -> list[dict[str, dict[str, Any]]]:
    """The entries in order, cut into runs whose one-column-per-entry table is at most MAX_WIDTH wide."""
    groups: list[dict[str, dict[str, Any]]] = [{}]
    for name, entry in entries.items():
        if groups[-1] and _width({**groups[-1], name: entry}, keys, by_entry=True) > MAX_WIDTH:
            groups.append({})
        groups[-1][name] = entry
    return groups


def _by_key(title: str, entries: dict[str, dict[str, Any]], keys: list[str]) -> Table:
    """One row per key and one column per entry: as CSV, tidy rows (name, key, value)."""
    table = tidy_key(Table(title=title), "name")
    table.add_column("", no_wrap=True)
    for name in entries:
        table.add_column(name, justify="right")
    for k in keys:
        table.add_row(k, *(_cell(e.get(k)) for e in entries.values()))
    return table
