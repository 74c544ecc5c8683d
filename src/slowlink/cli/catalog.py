"""CLI for the catalog: ``slowlink catalog [SECTION] [NAME]`` lists what slowlink knows and where it is from."""

from __future__ import annotations

from pathlib import Path

import typer

from slowlink.cli.common import clean_errors, out, print_json
from slowlink.errors import SpecError

# The sections by the names the help and the messages use; what a user may type for each (the file's own
# key, and the words people use for it) maps to its key. Suggestions name the sections only, never an alias.
_SECTIONS = ("gpus", "scale-up", "transports")
_ALIASES = {"gpus": "gpus", "gpu": "gpus", "scale_up": "scale_up", "scale-up": "scale_up", "links": "scale_up",
            "link": "scale_up", "transports": "transports", "transport": "transports", "nics": "transports",
            "nic": "transports"}


_CATALOG = typer.Option([], "--catalog", help="A catalog file of your own, added on top (as a cluster's "
                        "`catalog:` list does); repeatable.")


@clean_errors
def catalog_cmd(
    section: str | None = typer.Argument(None, help="gpus, scale-up (links) or transports (NICs); all if absent."),
    name: str | None = typer.Argument(None, help="One entry of the section, shown in full."),
    catalog: list[Path] = _CATALOG,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    sources: bool = typer.Option(True, "--sources/--no-sources", help="Show where each entry's figures are from."),
) -> None:
    """List the hardware catalog (GPUs, scale-up links, transports) with the source of every entry."""
    from slowlink.catalog.store import catalog_entries, nearest
    from slowlink.report.catalog import catalog_tables

    entries = catalog_entries(list(catalog))
    if section is not None:
        if section not in _ALIASES:
            raise SpecError(f"SECTION ({section!r}) is not a catalog section{nearest(section, list(_SECTIONS))}")
        entries = {_ALIASES[section]: entries[_ALIASES[section]]}
    if name is not None:
        (sec, found), = entries.items()
        if name not in found:
            raise SpecError(f"NAME ({name!r}) is not in the catalog's {sec}{nearest(name, list(found))}")
        entries = {sec: {name: found[name]}}
    if as_json:
        print_json(entries)
        return
    for sec, found in entries.items():
        for table in catalog_tables(sec, found, sources):
            out.print(table)


def register(app: typer.Typer, validate_app: typer.Typer) -> None:
    app.command("catalog")(catalog_cmd)
