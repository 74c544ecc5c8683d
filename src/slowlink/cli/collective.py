"""``slowlink collective`` and ``slowlink validate collectives``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from slowlink import units
from slowlink.cli.common import clean_errors, print_json, progress
from slowlink.collectives import OPS, Prediction, predict
from slowlink.collectives.model import default_group
from slowlink.collectives.validate import validate
from slowlink.errors import SpecError
from slowlink.report.collective import DTYPE_BYTES, sweep_table, validation_table
from slowlink.spec.cluster import Cluster, load_cluster

out = Console(highlight=False, width=170)  # nccl-tests tables are wide; never wrap a row


def _sizes(size: str | None, sweep: str | None) -> list[float]:
    if (size is None) == (sweep is None):
        raise SpecError("give exactly one of --size (e.g. 1GiB) or --sweep (e.g. 8:8GiB:2)")
    try:
        return [units.parse_size(size)] if size is not None else units.parse_sweep(str(sweep))
    except ValueError as exc:
        flag = "--size" if size is not None else "--sweep"
        raise SpecError(f"{flag}: {exc}") from None


def run_collective(cluster_file: Path, op: str, sizes: list[float], ranks: int | None,
                   fidelity: str = "analytical") -> list[Prediction]:
    """Predictions for each size (the library call behind the command), analytical or flow-level."""
    cluster = load_cluster(cluster_file)
    if ranks is not None and (ranks < 1 or ranks > cluster.gpus):
        raise SpecError(f"--ranks ({ranks}) must be between 1 and the cluster's GPUs ({cluster.nodes} x "
                        f"{cluster.gpus_per_node} = {cluster.gpus})")
    if fidelity == "flow":
        return _flow(cluster, op, sizes, ranks)
    if fidelity != "analytical":
        raise SpecError(f"--fidelity ({fidelity!r}) must be analytical or flow")
    group = default_group(cluster, ranks)
    return [predict(cluster, op, s, group) for s in sizes]


def _flow(cluster: Cluster, op: str, sizes: list[float], ranks: int | None) -> list[Prediction]:
    """The flow simulator on the cluster's topology graph (block placement, the first ``ranks`` GPUs)."""
    from slowlink.sim.collectives import simulate_collective
    from slowlink.topology.build import build

    topo = build(cluster)
    gpu_ids = list(range(ranks if ranks is not None else cluster.gpus))
    try:
        return [simulate_collective(cluster, op, s, gpu_ids, topo)[0] for s in progress(sizes, f"flow {op}")]
    except ValueError as exc:
        raise SpecError(f"--op with --fidelity flow: {exc}") from None


@clean_errors
def collective(
    cluster_file: Annotated[Path, typer.Argument(help="Cluster YAML/JSON file.")],
    op: Annotated[str, typer.Option("--op", help=f"One of {', '.join(OPS)}.")] = "all_reduce",
    size: Annotated[str | None, typer.Option("--size", help="Size (nccl-tests), e.g. 1GiB.")] = None,
    sweep: Annotated[str | None, typer.Option("--sweep", help="MIN:MAX:FACTOR, e.g. 8:8GiB:2.")] = None,
    ranks: Annotated[int | None, typer.Option("--ranks", help="Ranks (default: every GPU).")] = None,
    dtype: Annotated[str, typer.Option("--dtype", help=f"Element type: {', '.join(DTYPE_BYTES)}.")] = "float",
    fidelity: Annotated[str, typer.Option("--fidelity", help="analytical (NCCL's model) or flow (simulator).")]
    = "analytical",
    as_json: Annotated[bool, typer.Option("--json", help="JSON on stdout.")] = False,
    compare: Annotated[Path | None, typer.Option("--compare", help="A bench collectives result: predicted vs "
                                                  "measured at its op, ranks and sizes.")] = None,
    html: Annotated[Path | None, typer.Option("--html", help="Also write an HTML report (busbw vs size, "
                                               "measured overlaid with --compare) to this file.")] = None,
) -> None:
    """Predict a collective's time, algbw and busbw, with the algorithm NCCL would pick, and why."""
    from slowlink.report import html as report_html

    report_html.check_html_path(html)
    if compare is not None:
        points = _compare(cluster_file, compare, as_json)
        if html is not None:
            report_html.write_compare(html, load_cluster(cluster_file), points, str(compare))
        return
    if dtype not in DTYPE_BYTES:
        raise SpecError(f"--dtype ({dtype!r}) is not one of {', '.join(DTYPE_BYTES)}")
    sizes = _sizes(size, sweep)
    if min(sizes) < DTYPE_BYTES[dtype]:
        raise SpecError(f"--size/--sweep ({min(sizes):g} B) must be >= one {dtype} element ({DTYPE_BYTES[dtype]} B): "
                        "a smaller size has a count of 0")
    preds = run_collective(cluster_file, op, sizes, ranks, fidelity)
    if html is not None:
        report_html.write_collective(html, load_cluster(cluster_file), preds)
    if as_json:
        objs = [p.to_json() for p in preds]
        print_json(objs[0] if size is not None else objs)
        return
    out.print(sweep_table(preds, dtype, f"{op} on {cluster_file} ({preds[0].ranks} ranks)"))
    if size is not None:
        out.print(f"reason: {preds[0].reason}")


def _compare(cluster_file: Path, result: Path, as_json: bool) -> list[dict[str, Any]]:
    """Predicted against measured per size, with the mean and max |error|."""
    from slowlink.bench.calibrate import predicted_vs_measured
    from slowlink.bench.record import load_record
    from slowlink.report.bench import predicted_table

    points = predicted_vs_measured(load_cluster(cluster_file), load_record(result))
    errs = [abs(p["error_pct"]) for p in points]
    summary = {"mean_abs_error_pct": sum(errs) / len(errs), "max_abs_error_pct": max(errs)}
    if as_json:
        print_json({"points": points, **summary})
        return points
    out.print(predicted_table(points, f"{points[0]['op']} x{points[0]['ranks']}: {cluster_file} vs {result}"))
    out.print(f"mean |error| {summary['mean_abs_error_pct']:.1f}%, max |error| {summary['max_abs_error_pct']:.1f}%")
    return points


@clean_errors
def validate_collectives(
    as_json: Annotated[bool, typer.Option("--json", help="JSON on stdout.")] = False,
) -> None:
    """Compare the collective model with published nccl-tests measurements."""
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
