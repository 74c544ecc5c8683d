"""Rendering of the hardware catalog (``slowlink catalog``): one table per section, the source last."""

from __future__ import annotations

from typing import Any

from rich.table import Table

_TITLES = {"gpus": "GPUs", "scale_up": "scale-up links", "transports": "scale-out transports"}


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def catalog_table(section: str, entries: dict[str, dict[str, Any]], sources: bool = True) -> Table:
    """One row per entry, the file's keys (and units) as columns, in the order the entries write them."""
    keys: list[str] = []
    for entry in entries.values():
        keys += [k for k in entry if k != "source" and k not in keys]
    table = Table(title=f"catalog: {_TITLES.get(section, section)} ({len(entries)})")
    table.add_column("name", no_wrap=True)
    for k in keys:
        table.add_column(k, justify="right")
    if sources:
        table.add_column("source")
    for name, entry in entries.items():
        row = [name, *(_cell(entry.get(k)) for k in keys)]
        table.add_row(*row, *([entry.get("source", "")] if sources else []))
    return table
