"""CLI for the bench area: ``slowlink bench collectives``."""

from __future__ import annotations

import typer
from rich.table import Table

from slowlink.cli.common import clean_errors, out, print_json
from slowlink.errors import BenchError
from slowlink.units import parse_size

bench_app = typer.Typer(help="Measure collectives on this machine over torch.distributed.",
                        add_completion=False, no_args_is_help=True)


def _sizes(lo: str, hi: str, factor: float) -> tuple[float, ...]:
    try:
        a, b = parse_size(lo), parse_size(hi)
    except ValueError as exc:
        raise BenchError(str(exc)) from None
    if a <= 0 or b < a or factor <= 1:
        raise BenchError(
            f"sizes (-b {lo} -e {hi} -f {factor:g}) need 0 < minbytes <= maxbytes and factor > 1"
        )
    sizes = []
    s = a
    while s <= b * (1 + 1e-9):
        sizes.append(s)
        s *= factor
    return tuple(sizes)


@clean_errors
def collectives(
    op: str = typer.Option("all_reduce", "-o", "--op", help="Collective to measure."),
    minbytes: str = typer.Option("1MiB", "-b", "--minbytes", help="Smallest size."),
    maxbytes: str = typer.Option("64MiB", "-e", "--maxbytes", help="Largest size."),
    stepfactor: float = typer.Option(2.0, "-f", "--stepfactor", help="Size multiplier."),
    iters: int = typer.Option(20, "-n", "--iters", help="Timed iterations per size."),
    warmup: int = typer.Option(5, "-w", "--warmup_iters", help="Warm-up iterations per size."),
    check: int = typer.Option(1, "-c", "--check", help="Check results (1) or not (0)."),
    nproc: int = typer.Option(2, "--nproc", help="Local ranks to launch."),
    backend: str = typer.Option("gloo", "--backend", help="gloo (nccl: not yet)."),
    timeout_s: float = typer.Option(120.0, "--timeout", help="Seconds before the run is stopped."),
    as_json: bool = typer.Option(False, "--json", help="Print rows as JSON."),
) -> None:
    """Sweep one collective over sizes, nccl-tests style (size, time, algbw, busbw, #wrong)."""
    from slowlink.bench.collectives import OPS, BenchConfig, launch_local

    if op not in OPS:
        raise BenchError(f"op ({op!r}) must be one of {', '.join(OPS)}")
    if backend != "gloo":
        raise BenchError(f"backend ({backend!r}) is not supported yet; use gloo")
    if iters < 1 or warmup < 0:
        raise BenchError(f"iters ({iters}) must be >= 1 and warmup_iters ({warmup}) >= 0")
    cfg = BenchConfig(op=op, sizes_bytes=_sizes(minbytes, maxbytes, stepfactor), iters=iters,
                      warmup_iters=warmup, check=bool(check), backend=backend)
    rows = launch_local(cfg, nproc, timeout_s)
    if as_json:
        print_json(rows)
    else:
        t = Table("size (B)", "count", "type", "redop", "root", "time (us)", "algbw (GB/s)",
                  "busbw (GB/s)", "#wrong")
        for r in rows:
            t.add_row(str(r["size_bytes"]), str(r["count"]), r["type"], r["redop"], str(r["root"]),
                      f"{r['time_s'] * 1e6:.1f}", f"{r['algbw_gbyte_s']:.3f}", f"{r['busbw_gbyte_s']:.3f}",
                      str(r["wrong"]))
        out.print(t)
    if any(r["wrong"] for r in rows):
        raise typer.Exit(1)


bench_app.command("collectives")(collectives)


def register(app: typer.Typer, validate_app: typer.Typer) -> None:
    """Add this area's subcommands to the root app and to `slowlink validate`."""
    app.add_typer(bench_app, name="bench")
