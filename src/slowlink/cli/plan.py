"""CLI for the plan area: `slowlink plan`, `slowlink scale` and `slowlink validate` (published runs)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from slowlink.cli.common import clean_errors, err, out, parse_budget, print_json
from slowlink.errors import FabricMisfit, InfeasiblePlan, SlowlinkError, SpecError
from slowlink.sim.fidelity import check_fidelity
from slowlink.spec.cluster import Cluster, load_cluster
from slowlink.spec.workload import Workload, load_workload

if TYPE_CHECKING:  # the model (numpy) loads when a command runs: `plan -h` needs none of it
    from slowlink.assess import Assessment, Budget
    from slowlink.spec.prices import PriceBook
    from slowlink.trace.calibrate import TraceCalibration

_FILES = typer.Argument(..., help="CLUSTER.yaml WORKLOAD.yaml, or clusters with --workload.")
_WORKLOAD = typer.Option(None, "--workload", help="Workload file for several clusters.")
_JSON = typer.Option(False, "--json", help="Print JSON.")
_FIDELITY = typer.Option("analytical", "--fidelity", help="analytical (collective model) or flow (simulator).")
_HTML = typer.Option(None, "--html", help="Also write a self-contained HTML report with figures to this file.")
_TOKENS = typer.Option(None, "--tokens", help="Token budget, e.g. 15T or 15e12 (default: training.tokens): adds "
                       "the days, GPU-hours and cost to train it.")
_STEPS = typer.Option(None, "--steps", help="Training steps instead of a token budget.")
_PRICES = typer.Option(None, "--prices", help="Your own quotes (same keys as cost/data/prices.yaml), replacing the "
                       "bundled entries they name.")
_TRACE = typer.Option(None, "--trace", help="PyTorch profiler traces of this workload (a directory, or a file per "
                      "rank, --trace repeated): their step and collectives calibrate the compute and the collective "
                      "model.")
_TRACE_CLUSTER = typer.Option(None, "--trace-cluster", help="The cluster the trace ran on (default: the first "
                              "cluster).")


def _assess_named(w: Workload, c: Cluster, files: tuple[Path, Path], several: bool, fidelity: str,
                  prices: PriceBook, budget: Budget, cal: TraceCalibration | None = None
                  ) -> Assessment | InfeasiblePlan | FabricMisfit:
    """The assessment of one cluster; with several clusters one that cannot run the workload (an infeasible plan,
    a fabric its switches cannot build) is its error (a column of its own, not an abort); any other error, and
    either on one cluster, names both ``files`` (workload, cluster) and the cluster."""
    from slowlink.assess import assess
    from slowlink.sim.fidelity import comm_cost

    try:
        if cal is not None:  # the trace's calibrations: a slower or faster GPU, each measured op scaled
            return assess(w, cal.cluster(c), budget=budget, prices=prices, fidelity=fidelity,
                          comm=cal.comm_cost(c, comm_cost(fidelity, c)))
        return assess(w, c, budget=budget, prices=prices, fidelity=fidelity)
    except SlowlinkError as exc:
        if several and isinstance(exc, InfeasiblePlan | FabricMisfit):
            return exc
        raise _named(exc, files, c) from None


def _named(exc: SlowlinkError, files: tuple[Path, Path], c: Cluster) -> SlowlinkError:
    """``exc`` again, its message led by the workload and cluster ``files`` and the cluster's name."""
    wpath, cpath = files
    return exc.reworded(f"{wpath} on {cpath} (cluster {c.name}): {exc}")


def column_keys(clusters: list[Cluster], paths: list[Path]) -> list[str]:
    """Each cluster's name, or its file when two clusters share a name (and its position when the file is
    given twice)."""
    names = [c.name for c in clusters]
    keys = [n if names.count(n) == 1 else str(p) for n, p in zip(names, paths, strict=True)]
    return [k if keys.count(k) == 1 else f"{k} #{i + 1}" for i, k in enumerate(keys)]


@clean_errors
def plan_cmd(
    files: list[Path] = _FILES,
    workload: Path | None = _WORKLOAD,
    as_json: bool = _JSON,
    fidelity: str = _FIDELITY,
    html: Path | None = _HTML,
    prices: Path | None = _PRICES,
    tokens: str | None = _TOKENS,
    steps: int | None = _STEPS,
    trace: list[Path] | None = _TRACE,
    trace_cluster: Path | None = _TRACE_CLUSTER,
) -> None:
    """Predict step time, MFU, memory, the bottleneck, goodput and cost of a workload on one or more clusters."""
    from slowlink.assess import Assessment
    from slowlink.cost.prices import load_prices
    from slowlink.report.assess import plan_report
    from slowlink.report.plan import accuracy_sentence

    if workload is None:
        if len(files) != 2:
            raise SpecError(f"plan: got {len(files)} files: give CLUSTER.yaml WORKLOAD.yaml, or --workload")
        clusters, wpath = [files[0]], files[1]
    else:
        clusters, wpath = list(files), workload
    if html is not None:
        from slowlink.report import html as report_html

        report_html.check_html_path(html)
    check_fidelity(fidelity)
    budget = parse_budget(tokens, steps)
    w = load_workload(wpath)
    loaded = [load_cluster(c) for c in clusters]
    book = load_prices(prices)
    cal = None
    if trace:
        from slowlink.trace.calibrate import calibrate_files

        cal = calibrate_files(trace, w, load_cluster(trace_cluster) if trace_cluster else loaded[0], fidelity)
    done = [_assess_named(w, c, (wpath, path), len(loaded) > 1, fidelity, book, budget, cal)
            for c, path in zip(loaded, clusters, strict=True)]
    keys = column_keys(loaded, clusters)
    infeasible = {key: str(r) for key, r in zip(keys, done, strict=True) if not isinstance(r, Assessment)}
    if len(infeasible) == len(done):
        raise InfeasiblePlan(f"no cluster can run this workload ({wpath}):\n" + "\n".join(
            f"  {key}: {why}" for key, why in infeasible.items()), rule="fits_any_cluster")
    fits = {key: a for key, a in zip(keys, done, strict=True) if isinstance(a, Assessment)}
    if html is not None:
        report_html.write_plan(html, w, list(fits.values()),
                               [accuracy_sentence(a.accuracy, fidelity) for a in fits.values()])
    if as_json:
        on = dict(zip(keys, loaded, strict=True))
        js = {key: a.to_json() | ({"trace": cal.to_json(on[key])} if cal is not None else {})
              for key, a in fits.items()}
        js |= {key: {"infeasible": why} for key, why in infeasible.items()}
        print_json(next(iter(js.values())) if len(done) == 1 else {"clusters": {key: js[key] for key in keys}})
        return
    table, lines = plan_report(fits, infeasible, fidelity)
    out.print(table)
    for line in lines:
        out.print(line, soft_wrap=True)
    if cal is not None:
        from slowlink.report.trace import calibration_lines

        for line in calibration_lines(cal, loaded):
            out.print(line, soft_wrap=True, markup=False)


@clean_errors
def validate_runs(
    ctx: typer.Context,
    fail_above: float | None = typer.Option(
        None, "--fail-above", help="Exit 1 when the mean |error| of the calibration or the held-out set is above "
        "this many percent (a gate for CI).", min=0.0),
    as_json: bool = _JSON,
) -> None:
    """Model every published run: predicted vs measured, the error, the mean and max (calibration and held-out)."""
    if ctx.invoked_subcommand is not None:
        return
    from slowlink.report.plan import breakdown_text, error_summary, validate_table, validation_json
    from slowlink.workload.validate import cases, heldout_cases, mean_abs_error

    cs, held = cases(), heldout_cases()
    if as_json:
        print_json({"calibration": validation_json(cs), "held_out": validation_json(held)})
    else:
        out.print(validate_table(cs, "calibration set: step time, predicted vs measured (published_runs.yaml)"))
        out.print(error_summary(cs, "step-time"))
        out.print(validate_table(held, "held-out runs (never tuned on): MFU, predicted vs measured "
                                 "(heldout_runs.yaml)"))
        out.print(error_summary(held, "held-out MFU"))
        out.print(breakdown_text(held), soft_wrap=True)
    over = [f"{what} {mean_abs_error(c):.1%}" for what, c in (("calibration", cs), ("held-out", held))
            if fail_above is not None and mean_abs_error(c) * 100 > fail_above]
    if over:
        err.print(f"mean |error| above --fail-above ({fail_above:g}%): {', '.join(over)}", soft_wrap=True)
        raise typer.Exit(1)


_NODES = typer.Option("1,2,4,8", "--nodes", help="Node counts, comma separated.")
_MODE = typer.Option("global-batch", "--mode", help="global-batch or per-gpu-batch.")


@clean_errors
def scale_cmd(cluster: Path, workload: Path, nodes: str = _NODES, mode: str = _MODE,
              as_json: bool = _JSON, html: Path | None = _HTML, fidelity: str = _FIDELITY) -> None:
    """Per-GPU throughput, scaling efficiency and comm/compute ratio at each node count."""
    from slowlink.progress import progress
    from slowlink.report import html as report_html
    from slowlink.report.plan import refused_lines, scale_reason, scale_table
    from slowlink.scale import MODES, scale

    if mode not in MODES:
        raise SpecError(f"--mode ({mode!r}) must be one of {', '.join(MODES)}")
    try:
        counts = [int(x) for x in nodes.split(",")]
    except ValueError:
        raise SpecError(f"--nodes ({nodes!r}) must be comma-separated integers, e.g. 1,2,4,8") from None
    report_html.check_html_path(html)
    check_fidelity(fidelity)
    w, c = load_workload(workload), load_cluster(cluster)
    with progress(f"scale ({fidelity})", len(set(counts)), enabled=fidelity == "flow") as bar:
        try:
            pts = scale(w, c, counts, mode, fidelity, on_step=bar.begin)
        except SlowlinkError as exc:  # name the files, as plan does
            raise _named(exc, (workload, cluster), c) from None
    if html is not None:
        report_html.write_scale(html, c, w, pts, mode, scale_reason(pts))
    if as_json:
        print_json({"mode": mode, "fidelity": fidelity, "points": [p.to_json() for p in pts.points],
                    "infeasible": [r.to_json() for r in pts.refused]})
        return
    out.print(scale_table(pts, mode))
    for line in [*refused_lines(pts), scale_reason(pts)]:
        out.print(line, soft_wrap=True)


def register(app: typer.Typer, validate_app: typer.Typer) -> None:
    """Add this area's subcommands to the root app and to `slowlink validate`."""
    app.command("plan")(plan_cmd)
    app.command("scale")(scale_cmd)
    validate_app.callback(invoke_without_command=True)(validate_runs)
