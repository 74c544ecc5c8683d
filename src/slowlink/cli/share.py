"""CLI of the shared-cluster simulation: `slowlink share SCENARIO.yaml [--json]`."""

from __future__ import annotations

from pathlib import Path

import typer

from slowlink.cli.common import clean_errors, out, print_json

_JSON = typer.Option(False, "--json", help="Print JSON.")


@clean_errors
def share_cmd(scenario: Path, as_json: bool = _JSON) -> None:
    """Simulate a shared GPU cluster under each policy: utilisation, fragmentation, queueing, deadlocks."""
    from slowlink.report.share import share_tables
    from slowlink.share.sim import simulate_share
    from slowlink.share.spec import load_share

    spec, jobs, shape = load_share(scenario)
    result = simulate_share(spec, jobs, shape)
    if as_json:
        print_json(result.to_json())
        return
    for item in share_tables(result):
        out.print(item)


def register(app: typer.Typer, validate_app: typer.Typer) -> None:
    """Add this area's subcommands to the root app."""
    app.command("share")(share_cmd)
