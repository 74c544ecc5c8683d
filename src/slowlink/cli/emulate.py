"""CLI for the emulate area: `slowlink emulate up|run|status|down|link|rate|impair|kill`."""

from __future__ import annotations

from pathlib import Path

import typer

from slowlink import units
from slowlink.cli.common import clean_errors, out, print_json
from slowlink.emulate import net
from slowlink.emulate.plan import DEFAULT_SCALE, build_plan, plan_summary
from slowlink.spec.cluster import load_cluster

emulate_app = typer.Typer(help="An emulated cluster in Linux network namespaces (needs root).",
                          add_completion=False, no_args_is_help=True)


@clean_errors
def up_cmd(cluster: Path, scale: float = typer.Option(DEFAULT_SCALE, help="Link rate factor."),
           nodes: int | None = typer.Option(None, help="Emulate only this many nodes.")) -> None:
    """Build the namespaces, switches and shaped links of CLUSTER."""
    net.check_root()
    plan = net.up(build_plan(load_cluster(cluster), scale=scale, nodes=nodes))
    out.print(plan_summary(plan))


_CMD = typer.Argument(..., help="Command to run in each node, after --.")
_NODE = typer.Option(None, help="Only these node ranks.")


@clean_errors
def run_cmd(cmd: list[str] = _CMD, node: list[int] | None = _NODE) -> None:
    """Run CMD in every node namespace with NODE_RANK, WORLD, MASTER_ADDR, MASTER_PORT set."""
    net.check_root()
    codes = net.run(net.current(), cmd, node or None)
    raise typer.Exit(max(codes, default=0))


@clean_errors
def status_cmd(json_out: bool = typer.Option(False, "--json")) -> None:
    """Show the emulation that is up."""
    plan = net.current()
    if json_out:
        print_json(net.plan_to_json(plan))
    else:
        out.print(plan_summary(plan))


@clean_errors
def down_cmd() -> None:
    """Remove every namespace whose name starts with sl- (idempotent)."""
    removed = net.down()
    out.print(f"removed {len(removed)} namespaces")


@clean_errors
def link_cmd(name: str, state: str) -> None:
    """Take link NAME down or bring it up (e.g. `link up0 down`)."""
    net.set_link(net.current(), name, state)


@clean_errors
def rate_cmd(name: str, mbit_s: float) -> None:
    """Reshape link NAME to MBIT_S Mbit/s."""
    net.set_rate(net.current(), name, mbit_s * units.Mbit)


@clean_errors
def impair_cmd(name: str, delay_ms: float = typer.Option(0.0), loss: float = typer.Option(0.0)) -> None:
    """Add delay and loss to link NAME (needs netem in the kernel)."""
    net.impair(net.current(), name, delay_ms * units.MS, loss)


@clean_errors
def kill_cmd(node: int) -> None:
    """Kill every process in node NODE's namespace."""
    plan = net.current()
    out.print(f"killed {net.kill_all(plan.nodes[net.check_node(plan, node)])} processes")


def register(app: typer.Typer, validate_app: typer.Typer) -> None:
    """Add this area's subcommands to the root app and to `slowlink validate`."""
    for name, fn in (("up", up_cmd), ("run", run_cmd), ("status", status_cmd), ("down", down_cmd),
                     ("link", link_cmd), ("rate", rate_cmd), ("impair", impair_cmd), ("kill", kill_cmd)):
        emulate_app.command(name)(fn)
    app.add_typer(emulate_app, name="emulate")
