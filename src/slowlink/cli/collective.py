"""CLI for the collective area (being built; see the issue that owns it)."""

from __future__ import annotations

import typer


def register(app: typer.Typer, validate_app: typer.Typer) -> None:
    """Add this area's subcommands to the root app and to `slowlink validate`."""
