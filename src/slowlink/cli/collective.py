"""``slowlink collective`` and ``slowlink validate collectives``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from slowlink.cli.common import clean_errors, out, print_json
from slowlink.collectives.ops import OPS
from slowlink.spec.cluster import load_cluster
from slowlink.units import DTYPE_BYTES

if TYPE_CHECKING:
    from slowlink.bench.calibrate import PredictedPoint

# The model (numpy) loads inside the commands: `collective -h` needs none of it.


@clean_errors
def collective(
    cluster_file: Annotated[Path, typer.Argument(help="Cluster YAML/JSON file.")],
    op: Annotated[str, typer.Option("--op", help=f"One of {', '.join(OPS)}.")] = "all_reduce",
    size: Annotated[str | None, typer.Option("--size", help="Size (nccl-tests), e.g. 1GiB.")] = None,
    sweep: Annotated[str | None, typer.Option("--sweep", help="MIN:MAX:FACTOR, e.g. 8:8GiB:2.")] = None,
    minbytes: Annotated[str | None, typer.Option("-b", "--minbytes", help="nccl-tests: smallest size.")] = None,
    maxbytes: Annotated[str | None, typer.Option("-e", "--maxbytes", help="nccl-tests: largest size.")] = None,
    stepfactor: Annotated[float | None, typer.Option("-f", "--stepfactor", help="nccl-tests: size multiplier "
                                                     "(default 2).")] = None,
    ranks: Annotated[int | None, typer.Option("--ranks", help="Ranks (default: every GPU).")] = None,
    dtype: Annotated[str, typer.Option("-d", "--datatype", "--dtype",
                                       help=f"Element type: {', '.join(DTYPE_BYTES)}.")] = "float",
    algorithm: Annotated[str | None, typer.Option("--algorithm", help="Force an algorithm, as NCCL_ALGO does: "
                                                  "ring, tree, nvls, nvls_tree, pat, hierarchical (not for "
                                                  "all_to_all, send_recv).")] = None,
    protocol: Annotated[str | None, typer.Option("--protocol", help="Force a protocol, as NCCL_PROTO does: LL, "
                                                 "LL128, Simple (analytical only; all_to_all, send_recv: LL or "
                                                 "Simple, as P2P_LL_THRESHOLD would).")] = None,
    fidelity: Annotated[str, typer.Option("--fidelity", help="analytical (NCCL's model) or flow (simulator).")]
    = "analytical",
    as_json: Annotated[bool, typer.Option("--json", help="JSON on stdout.")] = False,
    compare: Annotated[Path | None, typer.Option("--compare", help="A bench collectives result: predicted vs "
                                                  "measured at its op, ranks and sizes.")] = None,
    html: Annotated[Path | None, typer.Option("--html", help="Also write an HTML report (busbw vs size, "
                                               "measured overlaid with --compare) to this file.")] = None,
) -> None:
    """Predict a collective's time, algbw and busbw, with the algorithm NCCL would pick, and why."""
    if html is not None:  # the report's module loads only for --html
        from slowlink.report import html as report_html

        report_html.check_html_path(html)
    if compare is not None:
        points = _compare(cluster_file, compare, as_json)
        if html is not None:
            report_html.write_compare(html, load_cluster(cluster_file), points, str(compare))
        return
    from slowlink.report.collective import sweep_table
    from slowlink.sim.fidelity import CollectiveQuery, predict_collective

    query = CollectiveQuery.from_options(op, size, sweep, minbytes, maxbytes, stepfactor, dtype=dtype, ranks=ranks,
                                         fidelity=fidelity, algorithm=algorithm, protocol=protocol)
    cluster = load_cluster(cluster_file)
    from slowlink.progress import track

    preds = predict_collective(cluster, query, track)
    if html is not None:
        report_html.write_collective(html, cluster, preds)
    if as_json:
        objs = [p.to_json() for p in preds]
        if cluster.degraded:  # each degraded part alone against the healthy cluster (docs/straggler.md)
            from slowlink.straggler.degraded import collective_degraded_by

            for o, parts in zip(objs, collective_degraded_by(cluster, query), strict=True):
                o["degraded_by"] = [x.to_json() for x in parts]
        print_json(objs[0] if size is not None else objs)
        return
    out.print(sweep_table(preds, dtype, f"{op} on {cluster_file} ({preds[0].ranks} ranks)"))
    if size is not None:
        out.print(f"reason: {preds[0].reason}")


def _compare(cluster_file: Path, result: Path, as_json: bool) -> list[PredictedPoint]:
    """Predicted against measured per size, with the mean and max |error|."""
    from slowlink.bench.calibrate import predicted_vs_measured
    from slowlink.bench.record import load_record
    from slowlink.report.bench import predicted_table

    points = predicted_vs_measured(load_cluster(cluster_file), load_record(result))
    errs = [abs(p.error_pct) for p in points]
    summary = {"mean_abs_error_pct": sum(errs) / len(errs), "max_abs_error_pct": max(errs)}
    if as_json:
        print_json({"points": [p.to_json() for p in points], **summary})
        return points
    out.print(predicted_table(points, f"{points[0].op} x{points[0].ranks}: {cluster_file} vs {result}"))
    out.print(f"mean |error| {summary['mean_abs_error_pct']:.1f}%, max |error| {summary['max_abs_error_pct']:.1f}%")
    return points


@clean_errors
def validate_collectives(
    as_json: Annotated[bool, typer.Option("--json", help="JSON on stdout.")] = False,
) -> None:
    """Compare the collective model with published nccl-tests measurements."""
    from slowlink.collectives.validate import validate
    from slowlink.report.collective import validation_table

    points = validate()
    errs = [abs(p.error) for p in points]
    if as_json:
        print_json({"points": [p.to_json() for p in points],
                    "mean_abs_error_pct": 100 * sum(errs) / len(errs), "max_abs_error_pct": 100 * max(errs)})
        return
    out.print(validation_table(points))
    out.print(f"mean |error| {100 * sum(errs) / len(errs):.1f}%, max |error| {100 * max(errs):.1f}%")


def register(app: typer.Typer, validate_app: typer.Typer) -> None:
    """Add this area's subcommands to the root app and to `slowlink validate`."""
    app.command("collective")(collective)
    validate_app.command("collectives")(validate_collectives)
