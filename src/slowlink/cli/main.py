"""The ``slowlink`` command: a thin typer app; each area registers its own subcommands."""

from __future__ import annotations

import typer

from slowlink import __version__
from slowlink.cli import bench, collective, emulate, plan, simulate

app = typer.Typer(
    name="slowlink",
    help="Where your multi-node GPU training will wait: plan, simulate and benchmark the cluster.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
validate_app = typer.Typer(
    help="Check slowlink's models against published or emulated measurements.",
    add_completion=False,
)
app.add_typer(validate_app, name="validate")


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", help="Print the version and exit.", is_eager=True),
) -> None:
    if version:
        print(__version__)
        raise typer.Exit(0)


for _area in (collective, plan, simulate, bench, emulate):
    _area.register(app, validate_app)


def run() -> None:
    """Console-script entry point."""
    app()
