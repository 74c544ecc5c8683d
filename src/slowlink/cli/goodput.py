"""CLI for the reliability area: `slowlink goodput` and `slowlink validate goodput`."""

from __future__ import annotations

from pathlib import Path

import typer

from slowlink.cli.common import clean_errors, err, out, parse_budget, print_json
from slowlink.errors import SpecError

_JSON = typer.Option(False, "--json", help="Print JSON.")
_TOKENS = typer.Option(None, "--tokens", help="Token budget, e.g. 15T or 15e12 (default: training.tokens).")
_STEPS = typer.Option(None, "--steps", help="Training steps instead of a token budget.")
_NO_MEM = typer.Option(False, "--no-memory-check", help="Plan even when the memory model says it does not fit "
                       "(a published run that did fit).")


@clean_errors
def goodput_cmd(cluster: Path, workload: Path, tokens: str | None = _TOKENS, steps: int | None = _STEPS,
                no_memory_check: bool = _NO_MEM, as_json: bool = _JSON) -> None:
    """Time and GPU-hours to train a token budget: MTTF, checkpoint interval, ETTR and the days each loss costs."""
    from slowlink.assess import assess
    from slowlink.report.goodput import losses_table, summary_table, sweep_table
    from slowlink.spec.cluster import load_cluster
    from slowlink.spec.workload import load_workload

    budget = parse_budget(tokens, steps)
    w, c = load_workload(workload), load_cluster(cluster)
    a = assess(w, c, budget=budget, check_memory=not no_memory_check, full=False)
    g = a.goodput
    if g is None:
        raise next(u for part in ("time_to_train", "failures") for u in a.unpriced if u.part == part).error()
    if as_json:
        print_json(g.to_json())
        return
    out.print(summary_table(w.name, g))
    out.print(losses_table(g))
    out.print(sweep_table(g))


@clean_errors
def validate_goodput(as_json: bool = _JSON) -> None:
    """Compare the reliability model with published MTTF, lost-work, ETTR and best-interval figures, each with its
    source."""
    from slowlink.reliability.validate import cases, summary
    from slowlink.report.goodput import error_summary, validation_table

    cs = cases()
    if as_json:
        s = summary(cs)
        print_json({"cases": [c.to_json() for c in cs]} | ({} if s is None else s.to_json()))
        return
    out.print(validation_table(cs))
    out.print(error_summary(cs))


_EMULATED = typer.Option(None, "--emulated", help="Drill on the emulated cluster of this cluster file, one rank "
                         "per node namespace (root); enables cut-link.")


@clean_errors
def drill_cmd(
    nproc: int = typer.Option(2, "--nproc", help="Local ranks (gloo on CPU)."),
    fault: str = typer.Option("kill-rank", "--fault", help="kill-rank, kill-node, hang, exception, "
                              "corrupt-checkpoint, truncate-checkpoint, kill-launcher, double-launch, disk-full "
                              "(root), or cut-link (--emulated)."),
    fault_step: int = typer.Option(5, "--fault-step", help="Steps completed when the fault strikes."),
    fault_rank: int = typer.Option(1, "--fault-rank", help="The rank that fails (kill-node: its node)."),
    fault_phase: str = typer.Option("step", "--fault-phase", help="step, or save: strike as a checkpoint "
                                    "begins (a torn checkpoint)."),
    steps: int = typer.Option(8, "--steps", help="Training steps of the job."),
    checkpoint_every: int = typer.Option(3, "--checkpoint-every", help="Steps between checkpoints."),
    max_restarts: int = typer.Option(2, "--max-restarts", help="torchrun's elastic restarts."),
    every_attempt: bool = typer.Option(False, "--every-attempt", help="Strike on every attempt (cannot recover)."),
    pg_timeout: float = typer.Option(10.0, "--pg-timeout", help="Process group timeout, s (detects a hang)."),
    timeout: float = typer.Option(300.0, "--timeout", help="Wall-clock limit of each run, s."),
    shutdown_timeout: int = typer.Option(30, "--shutdown-timeout", help="torchrun's --shutdown-timeout, s: SIGTERM's "
                                         "grace when an agent exits; a restart always waits torchrun's fixed 30 s."),
    emulated: Path | None = _EMULATED,
    nodes: int | None = typer.Option(None, "--nodes", help="--emulated: nodes to emulate (default: the file's)."),
    spare: bool = typer.Option(False, "--spare", help="--emulated kill-node: start the replacement agent on one "
                               "more node outside the job (a hot spare) instead of on the killed node."),
    store_node: bool = typer.Option(False, "--store-node", help="--emulated: host torchrun's rendezvous store on "
                                    "one more node of its own instead of in node 0's agent (node 0 may then fail)."),
    as_json: bool = _JSON,
) -> None:
    """Kill, hang or break a rank of a real torchrun job; check it resumes bit-identical, losing no committed step."""
    from slowlink.drill.harness import DrillConfig, run_drill
    from slowlink.progress import progress
    from slowlink.report.goodput import drill_lines, drill_table

    cfg = DrillConfig(nproc, steps, checkpoint_every, fault, fault_step, fault_rank, fault_phase, None,
                      max_restarts, every_attempt, pg_timeout, timeout, 0, shutdown_timeout)
    if emulated is not None:
        from slowlink.drill.emulated import run_emulated_drill

        with progress("drill", 4) as bar:  # bring-up, reference run, drill run, tear-down
            r = run_emulated_drill(cfg, emulated, nodes, spare=spare, store_node=store_node, on_step=bar.begin)
    elif nodes is not None or spare or store_node:
        flag, value = next((f, v) for f, v in (("nodes", nodes), ("spare", spare), ("store-node", store_node)) if v)
        raise SpecError(f"--{flag} ({value}) needs --emulated CLUSTER.yaml; locally the ranks are --nproc")
    else:
        with progress("drill", 2) as bar:  # reference run, drill run
            r = run_drill(cfg, on_step=bar.begin)
    if as_json:
        print_json(r.to_json())
    else:
        out.print(drill_table(r))
        for line in drill_lines(r):
            out.print(line, soft_wrap=True)
    refused = r.refused_by_system()
    if refused is not None:  # the machine, not the job, failed: its own exit code (slowlink.errors.SystemRefused)
        from slowlink.errors import SystemRefused
        from slowlink.report.goodput import refusal_line

        err.print(f"[bold red]error:[/] {refusal_line(refused)}", markup=True, soft_wrap=True)
        raise typer.Exit(SystemRefused.exit_code)
    if not r.ok:
        raise typer.Exit(1)


def register(app: typer.Typer, validate_app: typer.Typer) -> None:
    """Add this area's subcommands to the root app and to `slowlink validate`."""
    app.command("goodput")(goodput_cmd)
    app.command("drill")(drill_cmd)
    validate_app.command("goodput")(validate_goodput)
