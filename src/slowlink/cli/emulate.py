"""CLI for the emulate area: `slowlink emulate up|run|status|down|link|rate|impair|kill|sites`, `validate emulated`."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import typer

from slowlink import units
from slowlink.cli.common import clean_errors, out, print_json
from slowlink.emulate import net
from slowlink.emulate.plan import DEFAULT_SCALE, build_plan
from slowlink.errors import EmulationError, field_error
from slowlink.spec.cluster import load_cluster

emulate_app = typer.Typer(help="An emulated cluster in Linux network namespaces (needs root).",
                          add_completion=False, no_args_is_help=True)


_DELAY = typer.Option(None, "--delay", help="LINK=MS: added one-way delay on a link (repeatable).")
_LOSS = typer.Option(None, "--loss", help="LINK=FRACTION: frames dropped on a link (repeatable).")


def _pairs(items: list[str] | None, what: str, factor: float) -> dict[str, float]:
    table = {}
    for item in items or []:
        name, _, value = item.partition("=")
        try:
            table[name] = float(value) * factor
        except ValueError:
            raise EmulationError(field_error(what, item, "must be LINK=NUMBER, e.g. n0=5")) from None
    return table


@clean_errors
def up_cmd(cluster: Path, scale: float = typer.Option(DEFAULT_SCALE, help="Link rate factor."),
           nodes: int | None = typer.Option(None, help="Emulate only this many nodes."),
           delay: list[str] | None = _DELAY, loss: list[str] | None = _LOSS) -> None:
    """Build the namespaces, switches and shaped links of CLUSTER."""
    from slowlink.progress import status
    from slowlink.report.emulate import plan_summary

    net.check_root()
    built = build_plan(load_cluster(cluster), scale=scale, nodes=nodes, delay_s=_pairs(delay, "delay", units.MS),
                       loss=_pairs(loss, "loss", 1.0))
    with status(f"emulate up: {len(built.namespaces)} namespaces, {len(built.links)} links"):
        plan = net.up(built)
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
    from slowlink.report.emulate import plan_summary

    plan = net.current()
    if json_out:
        print_json(net.plan_to_json(plan))
    else:
        out.print(plan_summary(plan))


@clean_errors
def down_cmd(run: str | None = typer.Argument(None, help="The run id to remove (`emulate status` shows it)."),
             every: bool = typer.Option(False, "--all", help="Remove every sl- namespace on the host, other "
                                        "runs' included.")) -> None:
    """Remove one emulation (RUN, or the only one up) and any whose owner is gone; --all: every sl- namespace."""
    from slowlink.progress import status

    if every and run is not None:
        raise EmulationError(field_error("--all", True, f"and RUN ({run!r}): give one of them"))
    with status("emulate down"):
        if every:
            out.print(f"removed {len(net.down())} namespaces")
            return
        removed = net.down_run(run)
    out.print(f"removed {len(removed)} run(s): {', '.join(removed) or 'none was up'}")


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
    """Set link NAME's added one-way delay and loss (netem, or a relay namespace without it); 0 0 clears."""
    net.impair(net.current(), name, delay_ms * units.MS, loss)


@clean_errors
def kill_cmd(node: int) -> None:
    """Kill every process in node NODE's namespace."""
    out.print(f"killed {net.kill_node(net.current(), node)} processes")


FLOAT32_BYTES = 4  # emulate/collective.py runs the collectives on float32 tensors
DEFAULT_SIZE = "4MiB"  # validate emulated's size per collective when none is given


def check_emulated_size(size_bytes: float, ops: list[str], ranks: int) -> None:
    """--size must be whole float32 elements, and for all_to_all a whole number of them per rank (gloo's
    all_to_all_single splits the tensor into ``ranks`` equal blocks and refuses a remainder)."""
    elems, rest = divmod(size_bytes, FLOAT32_BYTES)
    shown = int(size_bytes) if size_bytes == int(size_bytes) else size_bytes
    if elems < 1 or rest:
        raise EmulationError(field_error("--size", shown, f"must be a positive multiple of {FLOAT32_BYTES} B "
                                         "(the collectives run on float32)"))
    if "all_to_all" in ops and elems % ranks:
        raise EmulationError(field_error("--size", shown, f"must be a multiple of {FLOAT32_BYTES} B x "
                                         f"{ranks} ranks = {FLOAT32_BYTES * ranks} B for all_to_all, which "
                                         "sends each rank an equal share"))


@clean_errors
def validate_cmd(cluster: Path, json_out: bool = typer.Option(False, "--json"),
                 ops: str = typer.Option("all_reduce,all_to_all", help="Collectives, comma-separated."),
                 size: str | None = typer.Option(None, help="Size per collective (nccl-tests convention); default "
                                                 "4MiB, rounded down to whole float32 elements per rank."),
                 iters: int = typer.Option(3, help="Timed iterations (after one warm-up)."),
                 scale: float = typer.Option(DEFAULT_SCALE, help="Link rate factor."),
                 delay: list[str] | None = _DELAY) -> None:
    """Bring CLUSTER up emulated, measure gloo collectives, compare the flow and analytical models."""
    from slowlink.emulate.validate import validate
    from slowlink.progress import progress
    from slowlink.report.emulate import cpu_warning, validation_table

    try:
        size_bytes = units.parse_size(size if size is not None else DEFAULT_SIZE)
    except ValueError as exc:
        raise EmulationError(str(exc)) from None
    op_list = [o for o in ops.split(",") if o]
    bad = [o for o in op_list if o not in ("all_reduce", "all_to_all")]
    if bad or not op_list or iters < 1:
        raise EmulationError(field_error("ops/iters", (ops, iters), "need all_reduce/all_to_all and iters >= 1"))
    c = load_cluster(cluster)
    plan = build_plan(c, scale=scale, delay_s=_pairs(delay, "delay", units.MS))
    if size is None:  # the default fits every cluster: all_to_all sends each rank a whole number of elements
        size_bytes -= size_bytes % (FLOAT32_BYTES * len(plan.nodes))
    check_emulated_size(size_bytes, op_list, len(plan.nodes))  # before anything is brought up
    net.check_root()
    with progress("validate emulated", len(op_list) + 2) as steps:  # bring-up, each op, tear-down
        rows = validate(c, plan, op_list, size_bytes, iters, on_step=steps.begin)
    if json_out:
        print_json([asdict(r) for r in rows])
        return
    out.print(validation_table(rows))
    if (warning := cpu_warning(rows)) is not None:
        out.print(warning, soft_wrap=True)


@clean_errors
def sites_cmd(cluster: Path, json_out: bool = typer.Option(False, "--json"),
              params: int = typer.Option(500_000, help="Parameters of the small fp32 model."),
              steps: int = typer.Option(8, help="Timed steps of each method (DiLoCo: rounded up to whole H)."),
              inner_steps: int = typer.Option(4, "--inner-steps", help="DiLoCo's H."),
              scale: float = typer.Option(DEFAULT_SCALE, help="Link rate factor.")) -> None:
    """Bring CLUSTER's two sites up emulated (the long haul shaped and delayed), train a small model by DDP and by
    DiLoCo over gloo, and compare step time and long-haul bytes with the sites model."""
    from slowlink.emulate.sites import site_plan, validate_sites
    from slowlink.progress import status
    from slowlink.report.emulate import sites_table

    c = load_cluster(cluster)
    site_plan(c, scale)  # its refusals (not two sites, a rate out of range) before anything is brought up
    net.check_root()
    with status("emulate sites: ddp and diloco across the long haul"):
        v = validate_sites(c, scale, params, steps, inner_steps)
    if json_out:
        print_json(v.to_json())
        return
    out.print(sites_table(v))


def register(app: typer.Typer, validate_app: typer.Typer) -> None:
    """Add this area's subcommands to the root app and to `slowlink validate`."""
    for name, fn in (("up", up_cmd), ("run", run_cmd), ("status", status_cmd), ("down", down_cmd),
                     ("link", link_cmd), ("rate", rate_cmd), ("impair", impair_cmd), ("kill", kill_cmd),
                     ("sites", sites_cmd)):
        emulate_app.command(name)(fn)
    app.add_typer(emulate_app, name="emulate")
    validate_app.command("emulated")(validate_cmd)
