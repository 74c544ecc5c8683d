"""CLI for the plan area: `slowlink plan`, `slowlink scale` and `slowlink validate` (published runs)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from slowlink.cli.common import clean_errors, err, out, print_json
from slowlink.errors import InfeasiblePlan, SlowlinkError, SpecError
from slowlink.sim.fidelity import check_fidelity, comm_cost
from slowlink.spec.cluster import Cluster, load_cluster
from slowlink.workload.spec import Workload, load_workload

if TYPE_CHECKING:  # the model (numpy) loads when a command runs: `plan -h` needs none of it
    from slowlink.reliability.goodput import Goodput
    from slowlink.storage.plan import StoragePlan
    from slowlink.workload.comm import CommCost
    from slowlink.workload.step import StepResult

_FILES = typer.Argument(..., help="CLUSTER.yaml WORKLOAD.yaml, or clusters with --workload.")
_WORKLOAD = typer.Option(None, "--workload", help="Workload file for several clusters.")
_JSON = typer.Option(False, "--json", help="Print JSON.")
_FIDELITY = typer.Option("analytical", "--fidelity", help="analytical (collective model) or flow (simulator).")
_HTML = typer.Option(None, "--html", help="Also write a self-contained HTML report with figures to this file.")


def _plan_named(w: Workload, c: Cluster, cost: CommCost | None, files: tuple[Path, Path],
                several: bool) -> StepResult | str:
    """The plan of one cluster; with several clusters an infeasible one is its reason (a column of its own,
    not an abort); any other error, and an infeasible plan on one cluster, names both ``files`` (workload,
    cluster) and the cluster."""
    from slowlink.workload.step import plan

    try:
        return plan(w, c, cost)
    except SlowlinkError as exc:
        if several and isinstance(exc, InfeasiblePlan):
            return str(exc)
        raise _named(exc, files, c) from None


def _named(exc: SlowlinkError, files: tuple[Path, Path], c: Cluster) -> SlowlinkError:
    """``exc`` again, its message led by the workload and cluster ``files`` and the cluster's name."""
    wpath, cpath = files
    return type(exc)(f"{wpath} on {cpath} (cluster {c.name}): {exc}")


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
) -> None:
    """Predict step time, MFU, memory and the bottleneck of a workload on one or more clusters."""
    from slowlink.report.plan import accuracy_json, accuracy_lines, accuracy_sentence, bottleneck_lines, plan_table
    from slowlink.report.storage import storage_rows
    from slowlink.storage.plan import plan_storage
    from slowlink.workload.accuracy import accuracy
    from slowlink.workload.advice import advise

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
    w = load_workload(wpath)
    loaded = [load_cluster(c) for c in clusters]
    costs = [comm_cost(fidelity, c) for c in loaded]
    planned = [_plan_named(w, c, k, (wpath, path), len(loaded) > 1)
               for c, k, path in zip(loaded, costs, clusters, strict=True)]
    keys = column_keys(loaded, clusters)
    infeasible = {key: r for key, r in zip(keys, planned, strict=True) if isinstance(r, str)}
    if len(infeasible) == len(planned):
        raise InfeasiblePlan(f"no cluster can run this workload ({wpath}):\n" + "\n".join(
            f"  {key}: {why}" for key, why in infeasible.items()))
    fits = [(key, c, r, k) for key, c, r, k in zip(keys, loaded, planned, costs, strict=True)
            if not isinstance(r, str)]
    names = [key for key, *_ in fits]
    results = [r for *_, r, _ in fits]
    advice = [advise(w, c, r, k) for _, c, r, k in fits]
    # The storage model (issue 14): data stall and checkpoint overhead beside communication.
    stor = [plan_storage(w, c, r) for _, c, r, _ in fits]
    gp = _goodputs(w, fits, stor)
    # the step model's measured error on the published runs alike (workload.accuracy)
    accs = [accuracy(c.gpu.name, w.parallel.tp, w.parallel.zero == 3) for _, c, *_ in fits]
    if html is not None:
        report_html.write_plan(html, [c for _, c, *_ in fits], w, results, advice,
                               [accuracy_sentence(a, fidelity) for a in accs])
    if as_json:
        from slowlink.report.goodput import goodput_json
        from slowlink.straggler.degraded import plan_degraded_by

        js = {key: r.to_json() | {"advice": [a.to_json() for a in adv], "storage": st.to_json()}
              | plan_degraded_by(w, c, fidelity, r)  # degraded parts and jitter (docs/straggler.md)
              | goodput_json(g)  # ETTR and time-to-train with a token budget (docs/goodput.md)
              | {"accuracy": accuracy_json(a)}
              for (key, c, *_), r, adv, st, g, a in zip(fits, results, advice, stor, gp, accs, strict=True)}
        js |= {key: {"infeasible": why} for key, why in infeasible.items()}
        print_json(next(iter(js.values())) if len(planned) == 1 else {"clusters": {key: js[key] for key in keys}})
        return
    out.print(plan_table(names, results, storage_rows(stor), infeasible))
    for line in bottleneck_lines(names, results, advice, [st.sentence() if st.dominates else "" for st in stor]):
        out.print(line, soft_wrap=True)
    for key, (_, c, r, _) in zip(names, fits, strict=True):
        out.print(f"[bold]{key}[/]: {r.memory.sentence(c.gpu.hbm_bytes)}", soft_wrap=True)
    for key, why in infeasible.items():
        out.print(f"[bold]{key}[/]: infeasible: {why}", soft_wrap=True)
    for line in accuracy_lines(names, accs, fidelity):
        out.print(line, soft_wrap=True)
    for key, g in zip(names, gp, strict=True):
        if g is not None:
            from slowlink.report.goodput import goodput_sentence

            out.print(f"[bold]{key}[/]: {goodput_sentence(g)}", soft_wrap=True)


def _goodputs(w: Workload, fits: list[tuple[str, Cluster, StepResult, CommCost | None]],
              stor: list[StoragePlan]) -> list[Goodput | str | None]:
    """The reliability model (issue 15): ETTR and time-to-train of each cluster when the workload names a token
    budget (:func:`~slowlink.reliability.goodput.plan_goodput`; without one it is None and the model, with
    its Monte Carlo, does not load)."""
    if w.training.tokens is None:
        return [None] * len(fits)
    from slowlink.reliability.goodput import plan_goodput

    return [plan_goodput(w, c, r, st.data_stall_s or 0.0) for (_, c, r, _), st in zip(fits, stor, strict=True)]


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
    from slowlink.report.plan import scale_reason, scale_table
    from slowlink.workload.scale import MODES, scale

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
            pts = scale(w, c, counts, mode, lambda ci: comm_cost(fidelity, ci), on_step=bar.begin)
        except SlowlinkError as exc:  # name the files, as plan does
            raise _named(exc, (workload, cluster), c) from None
    if html is not None:
        report_html.write_scale(html, c, w, pts, mode, scale_reason(pts))
    if as_json:
        print_json({"mode": mode, "fidelity": fidelity, "points": [
            {"nodes": p.nodes, "gpus": p.gpus, "global_batch": p.global_batch,
             "tokens_per_s_per_gpu": p.tokens_per_s_per_gpu, "scaling_efficiency": p.efficiency,
             **p.result.to_json()} for p in pts]})
        return
    out.print(scale_table(pts, mode))
    out.print(scale_reason(pts), soft_wrap=True)


def register(app: typer.Typer, validate_app: typer.Typer) -> None:
    """Add this area's subcommands to the root app and to `slowlink validate`."""
    app.command("plan")(plan_cmd)
    app.command("scale")(scale_cmd)
    validate_app.callback(invoke_without_command=True)(validate_runs)
