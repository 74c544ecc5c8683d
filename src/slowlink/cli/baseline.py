"""``slowlink baseline save``, ``slowlink compare`` and ``slowlink calibrate``: what happens to results."""

from __future__ import annotations

from pathlib import Path

import typer

from slowlink.cli.common import clean_errors, err, out, print_json
from slowlink.units import parse_size

baseline_app = typer.Typer(help="Keep benchmark results as named baselines.", add_completion=False,
                           no_args_is_help=True)
_DIR = typer.Option(Path("baselines"), "--dir", help="Folder of saved baselines.")
_JSON = typer.Option(False, "--json", help="Print JSON.")
_RESULT = typer.Argument(..., help="A result record from `slowlink bench ...`.")
_RESULTS_ARG = typer.Argument(None, help="Result(s) to check (--nodes: none when BASELINE is one collectives "
                              "result with per-rank times).")
_SIZE_TOL = typer.Option([], "--size-tolerance", help="SIZE:PERCENT for sizes below SIZE, e.g. 64KiB:30 (repeatable).")
_CAL_RESULT = typer.Argument(..., help="A collectives result (record or --json rows).")
_CAL_CLUSTER = typer.Option(..., "--cluster", help="The cluster file the result was measured on.")
_CAL_OUT = typer.Option(None, "--out", help="Profile path (default: CLUSTER.calibration.yaml).")


@clean_errors
def save(
    name: str = typer.Argument(..., help="Baseline name, e.g. pre-upgrade."),
    result: Path = _RESULT,
    folder: Path = _DIR,
) -> None:
    """Save RESULT as baseline NAME (a copy in --dir, with the name and the time saved)."""
    from slowlink.bench.compare import save_baseline

    err.print(f"saved baseline {name}: {save_baseline(name, result, folder)}")


@clean_errors
def compare(
    baseline: str = typer.Argument(..., help="Saved baseline name or result file (with --nodes: a result)."),
    results: list[Path] | None = _RESULTS_ARG,
    tolerance: float = typer.Option(10.0, "--tolerance", help="Allowed slowdown, percent."),
    size_tolerance: list[str] = _SIZE_TOL,
    nodes: bool = typer.Option(False, "--nodes", help="Compare each result with the median of all (slow node)."),
    folder: Path = _DIR,
    as_json: bool = _JSON,
) -> None:
    """Exit 1 when RESULT is slower than BASELINE beyond the tolerance (or, with --nodes, a node is slow)."""
    from slowlink.bench.compare import (
        compare_nodes,
        compare_records,
        node_name,
        parse_tolerance,
        resolve_baseline,
    )
    from slowlink.bench.record import load_record
    from slowlink.report.bench import compare_table

    tol = parse_tolerance(tolerance, size_tolerance)
    results = results or []
    if nodes:
        paths = [Path(baseline), *results]
        recs = [(node_name(p, r), r) for p in paths for r in [load_record(p)]]
        moves = compare_nodes(recs, tol)
        title = (f"each node's slowest row against the median of {len(recs)} nodes" if len(recs) > 1 else
                 f"each node's latest rank in {paths[0]} against the other ranks (time inside the collective)")
    else:
        if len(results) != 1:
            raise typer.BadParameter("give one RESULT (several only with --nodes)")
        moves = compare_records(load_record(resolve_baseline(baseline, folder)), load_record(results[0]), tol)
        title = f"{results[0]} against baseline {baseline}"
    bad = [m for m in moves if m.status == "regressed"]
    if as_json:
        print_json({"moves": [m.to_json() for m in moves], "regressed": len(bad)})
    else:
        out.print(compare_table(moves, title))
        out.print(f"{len(bad)} of {len(moves)} rows regressed" if bad else f"no regression in {len(moves)} rows")
    if bad:
        raise typer.Exit(1)


@clean_errors
def calibrate(
    result: Path = _CAL_RESULT,
    cluster: Path = _CAL_CLUSTER,
    output: Path | None = _CAL_OUT,
    min_size: str = typer.Option("0", "--min-size", help="Fit only rows at least this large."),
    as_json: bool = _JSON,
) -> None:
    """Fit the collective model's latency and bus bandwidth to a sweep; write the profile and a cluster file."""
    from slowlink.bench.calibrate import calibrate as run
    from slowlink.errors import SpecError

    try:
        lo = parse_size(min_size)
    except ValueError as exc:
        raise SpecError(f"--min-size: {exc}") from None
    profile, path, cal_cluster = run(result, cluster, output, lo)
    if as_json:
        print_json({"profile": str(path), "cluster": str(cal_cluster), **profile.model_dump()})
        return
    for f in profile.fits:
        out.print(f"{f.op} x{f.ranks} ({f.scope}, {f.backend}): {f.hop_latency_us:.1f} us per step, "
                  f"busbw {f.busbw_gbyte_s:.3f} GB/s; worst fit error {f.max_abs_error_pct:.1f}% over "
                  f"{f.min_size_bytes:.0f}-{f.max_size_bytes:.0f} B")
    out.print(f"profile: {path}\ncalibrated cluster: {cal_cluster} (use it with `slowlink collective` and "
              "`slowlink plan`)")


baseline_app.command("save")(save)


def register(app: typer.Typer, validate_app: typer.Typer) -> None:
    """Register `baseline`, `compare` and `calibrate` on the root app."""
    app.add_typer(baseline_app, name="baseline")
    app.command("compare")(compare)
    app.command("calibrate")(calibrate)
