"""The ``slowlink`` command: a thin typer app; each area registers its own subcommands, loaded on first use.

The root lists every command from :data:`COMMANDS` (name, area module, one-line summary) and imports an
area's module, and the libraries behind it (numpy, pydantic, scipy, networkx), only when one of its
commands runs or shows its own help: ``slowlink --help`` and ``slowlink --version`` import none of them.
The approach is click's documented lazy group ("Advanced Patterns: Lazily Loading Subcommands",
click.palletsprojects.com), on typer's group class so the help keeps typer's rich layout.
"""

from __future__ import annotations

import gc
import importlib
import os
from typing import Any

# Allocations between two young-generation collections while a command runs (CPython's default: 700). Set
# here, before typer, rich and the command's libraries load, not in run(): their imports alone are ~20 young
# collections at the default (see run() for why and where this comes from).
GC_THRESHOLD0 = 10_000
gc.set_threshold(GC_THRESHOLD0)

import typer  # noqa: E402  (after the collector's threshold: see above)
from typer.core import TyperGroup  # noqa: E402

from slowlink import __version__  # noqa: E402

_VALIDATE = "validate"
_SETS = "slowlink.sets"  # where LazyGroup keeps the --set arguments between parsing and invoking
_CSV = "slowlink.csv"  # set when --csv is on the command line
_VALIDATE_HELP = "Check slowlink's models against published or emulated measurements."

# command -> (the area module that registers it, the summary the root help shows). `validate` gathers
# commands from several areas. tests/cli/test_main.py checks that this table names every command the
# areas register, each with its own help's first line.
COMMANDS: dict[str, tuple[str, str]] = {
    "collective": ("slowlink.cli.collective",
                   "Predict a collective's time, algbw and busbw, with the algorithm NCCL would pick, and why."),
    "plan": ("slowlink.cli.plan",
             "Predict step time, MFU, memory, the bottleneck, goodput and cost of a workload on one or more "
             "clusters."),
    "scale": ("slowlink.cli.plan",
              "Per-GPU throughput, scaling efficiency and comm/compute ratio at each node count."),
    "simulate": ("slowlink.cli.simulate",
                 "Run several traffics (collectives, checkpoint bursts) at once on the cluster's fabric."),
    "compare": ("slowlink.cli.baseline", "Exit 1 when RESULT is slower than BASELINE beyond the tolerance "
                "(or, with --nodes, a node is slow)."),
    "calibrate": ("slowlink.cli.baseline", "Fit the collective model's latency and bus bandwidth to a sweep; "
                  "write the profile and a cluster file."),
    _VALIDATE: ("", _VALIDATE_HELP),
    "bench": ("slowlink.cli.bench", "Measure collectives, GEMMs and a small training job on this machine."),
    "baseline": ("slowlink.cli.baseline", "Keep benchmark results as named baselines."),
    "emulate": ("slowlink.cli.emulate", "An emulated cluster in Linux network namespaces (needs root)."),
    "catalog": ("slowlink.cli.catalog",
                "List the hardware catalog (GPUs, scale-up links, transports) with the source of every entry."),
    "init": ("slowlink.cli.init",
             "Write a commented example cluster file and workload file to start from, checked and planned."),
    "checkpoint-size": ("slowlink.cli.storage",
                        "Bytes of one checkpoint of a workload: per parameter and per part (no cluster needed)."),
    "checkpoint": ("slowlink.cli.storage", "Check checkpoints written by torch.distributed.checkpoint."),
    "reshard": ("slowlink.cli.storage", "Reshard a directory of small files into webdataset tar shards with an "
                "index, verified and resumable."),
    "bom": ("slowlink.cli.cost", "Bill of materials of a cluster's fabric (switches, links, optics, NICs), its "
            "capex, power and network share."),
    "cost": ("slowlink.cli.cost", "Cost per GPU-hour and per million tokens of a workload on a cluster "
             "(step model with its data stall x ETTR from the failure model)."),
    "search": ("slowlink.cli.cost", "Search a design space on Dask: the cheapest design per token and the Pareto "
               "front of cost vs time to train."),
    "share": ("slowlink.cli.share",
              "Simulate a shared GPU cluster under each policy: utilisation, fragmentation, queueing, deadlocks."),
    "degraded": ("slowlink.cli.slow",
                 "What the cluster's degraded parts cost a workload's step: per dimension, and each part alone."),
    "jitter": ("slowlink.cli.slow",
               "Expected step time against GPU count under per-rank jitter: closed form vs seeded Monte Carlo."),
    "find-slow": ("slowlink.cli.slow", "Name the slow link or node from per-link bandwidth and latency probes; "
                  "time a collective before and after."),
    "read": ("slowlink.cli.observe",
             "Read what users already have: nccl-tests output, NCCL_DEBUG logs, ibstat, perfquery/ethtool counters, "
             "nvidia-smi CSV, PyTorch profiler traces."),
    "doctor": ("slowlink.cli.observe", "Bottom-up checks (links, GPUs, versions, NCCL transport, busbw); "
               "exit 0 clean, 1 warnings, 3 errors."),
    "exporter": ("slowlink.cli.observe", "Serve benchmark results and plans as Prometheus metrics (re-read at "
                 "every scrape) until interrupted."),
    "inventory": ("slowlink.cli.observe", "This node's versions, NICs, IB ports and GPUs; across nodes, what "
                  "differs (exit 1 when anything does)."),
    "goodput": ("slowlink.cli.goodput", "Time and GPU-hours to train a token budget: MTTF, checkpoint interval, "
                "ETTR and the days each loss costs."),
    "drill": ("slowlink.cli.goodput", "Kill, hang or break a rank of a real torchrun job; check it resumes "
              "bit-identical, losing no committed step."),
}
AREAS = ("slowlink.cli.collective", "slowlink.cli.plan", "slowlink.cli.simulate", "slowlink.cli.bench",
         "slowlink.cli.baseline", "slowlink.cli.emulate", "slowlink.cli.catalog", "slowlink.cli.init",
         "slowlink.cli.storage", "slowlink.cli.cost", "slowlink.cli.share", "slowlink.cli.slow",
         "slowlink.cli.observe", "slowlink.cli.goodput")


def full_app(areas: tuple[str, ...] = AREAS) -> typer.Typer:
    """A root app with every command of ``areas`` registered (imports those modules)."""
    root = typer.Typer(add_completion=False)
    validate_app = typer.Typer(help=_VALIDATE_HELP, add_completion=False)
    root.add_typer(validate_app, name=_VALIDATE)
    for area in areas:
        importlib.import_module(area).register(root, validate_app)
    return root


class LazyGroup(TyperGroup):
    """Typer's group that builds a subcommand from its area module on first use."""

    listing = False  # True while the root help is drawn: the summaries come from COMMANDS, nothing loads

    def list_commands(self, ctx: Any) -> list[str]:
        return [*self.commands, *(n for n in COMMANDS if n not in self.commands)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            area, summary = COMMANDS[cmd_name]
            if self.listing:
                return typer.core.TyperCommand(name=cmd_name, help=summary)
            group = typer.main.get_group(full_app((area,) if area else AREAS))
            self.commands[cmd_name] = group.commands[cmd_name]
        return super().get_command(ctx, cmd_name)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """Take every ``--set KIND.path=value`` out of the command line, wherever it stands (before or after
        the subcommand, up to a ``--``), and keep it for :meth:`invoke`."""
        rest, sets, i = [], [], 0
        while i < len(args):
            arg = args[i]
            if arg == "--":
                rest += args[i:]
                break
            if arg == "--set":
                if i + 1 == len(args):
                    typer.echo("error: --set needs a value: KIND.key.path=value", err=True)
                    raise typer.Exit(2)
                sets.append(args[i + 1])
                i += 2
                continue
            if arg.startswith("--set="):
                sets.append(arg.removeprefix("--set="))
            elif arg == "--csv":
                ctx.meta[_CSV] = True
            else:
                rest.append(arg)
            i += 1
        ctx.meta[_SETS] = sets
        if ctx.meta.get(_CSV) and "--json" in rest:
            typer.echo("error: --csv and --json: choose one output format", err=True)
            raise typer.Exit(2)
        return list(super().parse_args(ctx, rest))

    def invoke(self, ctx: Any) -> Any:
        from slowlink.cli.common import out
        from slowlink.errors import SlowlinkError
        from slowlink.fileio import overriding

        out.csv, out.tables_printed = bool(ctx.meta.get(_CSV)), 0
        try:
            scope = overriding(ctx.meta.get(_SETS, []))
            scope.__enter__()
        except SlowlinkError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(exc.exit_code) from None
        gc.freeze()  # what the command's imports built stays to the end: no collection walks it again (run)
        try:
            return super().invoke(ctx)
        finally:
            scope.__exit__(None, None, None)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self.listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self.listing = False


def _print_version(value: bool) -> None:
    if value:
        print(__version__)
        raise typer.Exit(0)


app = typer.Typer(
    name="slowlink",
    cls=LazyGroup,
    help="Where your multi-node GPU training will wait: plan, simulate and benchmark the cluster.\n\n"
    "Every command that reads a cluster, workload or scenario file takes what-if overrides anywhere on its "
    "command line: --set KIND.key.path=value (KIND: cluster, workload or scenario), e.g. "
    "--set cluster.fabric.oversubscription=2 --set workload.parallel.tp=4.\n\n"
    "--csv anywhere on the command line prints every table as CSV on stdout (the rest goes to stderr).",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish, PowerShell
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", help="Print the version and exit.", is_eager=True,
                                 callback=_print_version),
) -> None:
    pass


# OpenBLAS's idle busy-wait, as log2 of CPU cycles (its default 28: ~0.1 s at ~2.5 GHz; 4 is the least it takes):
# numpy's OpenBLAS starts one worker thread per core at import, each spinning that long before it sleeps
# (OpenMathLib/OpenBLAS driver/others/blas_server.c; read from OPENBLAS_THREAD_TIMEOUT in openblas_env.c).
OPENBLAS_THREAD_TIMEOUT = "4"
# pydantic looks for plugins (pydantic.dev's Logfire and the like) among every installed distribution's entry
# points when it builds its first schema; "__all__" skips that (docs.pydantic.dev, "Pydantic Plugins": the
# PYDANTIC_DISABLE_PLUGINS variable). slowlink validates its own files, no plugin observes them: the scan and
# importlib.metadata were ~14 ms of a plan. A user who sets the variable keeps their choice.
PYDANTIC_PLUGINS = "__all__"


def run() -> None:
    """Console-script entry point.

    A command is one short process that builds its objects (~0.5 million: typer, pydantic's schemas, numpy,
    the models) and keeps most of them to the end, so the cyclic garbage collector's passes over them find
    little: the young generation is collected every :data:`GC_THRESHOLD0` allocations instead of 700, and
    everything is frozen (``gc.freeze``) once the command is done, so that the interpreter's shutdown does not
    walk it all once more. Together ~50 ms of a 0.35 s ``plan`` on a 2-core machine (benchmarks/bench_cli.py).
    The two knobs are those of Python's gc module (docs.python.org/3/library/gc.html: set_threshold; freeze,
    "to speed up collection"); Instagram's "Dismissing Python Garbage Collection at Instagram" (2017) made
    the same trade for its servers' start-up and exit.

    OpenBLAS's worker threads sleep as soon as they are idle (:data:`OPENBLAS_THREAD_TIMEOUT`, unless the
    environment sets it): slowlink's matrices are small, and the ~0.1 s each worker otherwise spins after numpy
    loads took ~140 ms of CPU and ~30 ms of wall time from a ``plan`` on 2 busy cores. The number of BLAS
    threads is left as it is; commands' child processes inherit the setting."""
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", OPENBLAS_THREAD_TIMEOUT)
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", PYDANTIC_PLUGINS)
    try:
        app()
    finally:
        gc.freeze()
