"""CLI for the straggler area: `slowlink degraded`, `slowlink jitter` and `slowlink find-slow`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from slowlink.cli.common import clean_errors, out, print_json
from slowlink.errors import SpecError, field_error

if TYPE_CHECKING:
    from slowlink.probe.slow import FindSlowResult

_JSON = typer.Option(False, "--json", help="Print JSON.")
_FIDELITY = typer.Option("both", "--fidelity", help="analytical, flow or both.")


def _numbers(text: str, flag: str, kind: type[int] | type[float]) -> tuple[float, ...]:
    try:
        return tuple(kind(x) for x in text.split(",") if x)
    except ValueError:
        raise SpecError(field_error(flag, text, f"must be comma-separated {kind.__name__}s")) from None


@clean_errors
def degraded_cmd(cluster: Path, workload: Path, fidelity: str = _FIDELITY, as_json: bool = _JSON) -> None:
    """What the cluster's degraded parts cost a workload's step: per dimension, and each part alone."""
    from slowlink.assess import assess
    from slowlink.report.straggler import degraded_sentence, degraded_table
    from slowlink.sim.fidelity import FIDELITIES, check_fidelity
    from slowlink.spec.cluster import load_cluster
    from slowlink.spec.workload import load_workload
    from slowlink.straggler.degraded import degraded_cost

    fids = FIDELITIES if fidelity == "both" else (check_fidelity(fidelity),)
    c, w = load_cluster(cluster), load_workload(workload)
    built = [assess(w, c, fidelity=f, full=False) for f in fids]  # the cluster as built: the chain's step
    costs = [degraded_cost(a.workload, c, f, a.step) for a, f in zip(built, fids, strict=True)]
    if as_json:
        print_json({x.fidelity: x.to_json() for x in costs})
        return
    out.print(degraded_table(costs))
    for x in costs:
        out.print(degraded_sentence(x), soft_wrap=True)


_GPUS = typer.Option("8,64,512,4096,16384", "--gpus", help="GPU counts, comma separated.")
_CVS = typer.Option(None, "--cv", help="Compute CVs, comma separated (default: the cluster's "
                    "variability.compute_cv, else 0.01,0.02,0.05).")
_DIST = typer.Option(None, "--distribution", help="normal or lognormal (default: the cluster's, else normal).")
_TRIALS = typer.Option(64, "--trials", help="Monte Carlo trials per point.")


@clean_errors
def jitter_cmd(cluster: Path, workload: Path, gpus: str = _GPUS, cv: str | None = _CVS,
               distribution: str | None = _DIST, trials: int = _TRIALS, as_json: bool = _JSON) -> None:
    """Expected step time against GPU count under per-rank jitter: closed form vs seeded Monte Carlo."""
    from slowlink.assess import assess
    from slowlink.report.straggler import jitter_table
    from slowlink.spec.cluster import load_cluster
    from slowlink.spec.workload import load_workload
    from slowlink.straggler.jitter import check_jitter
    from slowlink.straggler.sweep import DEFAULT_CVS, jitter_sweep, sync_points
    from slowlink.workload.step import check_plan

    counts = tuple(int(x) for x in _numbers(gpus, "--gpus", int))
    given = _numbers(cv, "--cv", float) if cv else ()
    for x in given:  # the arguments first: a refusal before any file is read or model run (issue 39)
        if not 0 <= x <= 1:
            raise SpecError(field_error("--cv", x, "must be between 0 and 1"))
    if trials < 2:
        raise SpecError(field_error("--trials", trials, "must be >= 2"))
    if distribution is not None:
        check_jitter(1, 0.0, 0.0, distribution)
    c, w = load_cluster(cluster), load_workload(workload)
    var = c.variability
    cvs = given or ((var.compute_cv,) if var and var.compute_cv else DEFAULT_CVS)
    dist = distribution or (var.distribution if var else "normal")
    for x in cvs:
        check_jitter(1, x, 0.0, dist)
    a = assess(w, c, full=False)
    result = a.step
    syncs = sync_points(a.workload, check_plan(a.workload, c))
    pts = jitter_sweep(result, syncs, counts, cvs, var.network_cv if var else 0.0, dist, trials,
                       var.seed if var else 0)
    if as_json:
        print_json({"distribution": dist, "syncs": syncs, "points": [p.to_json() for p in pts]})
        return
    out.print(jitter_table(pts, dist, syncs))


_EMULATED = typer.Option(None, "--emulated", help="Cluster file to emulate (root): its `degraded:` parts are "
                         "broken after a healthy measurement, then found by probes that do not read them.")
_OP = typer.Option("all_reduce", "--op", help="Collective timed healthy and degraded: all_reduce or all_to_all.")
_SIZE = typer.Option("1MiB", "--size", help="Its size (nccl-tests convention).")
_ITERS = typer.Option(3, "--iters", help="Timed iterations of each measurement.")
_RUN = typer.Option(None, "--run-id", help="Run id of the emulation (default: sw + 4 hex digits).")


_RECORD = typer.Option(None, "--record", help="A `bench train` result (ranks whose own compute is >10% above "
                       "the median rank's) or a gloo `bench collectives` result (ranks that arrive late: they "
                       "wait less inside the collective than the others, who wait for them).")


@clean_errors
def find_slow_cmd(emulated: Path | None = _EMULATED, record: Path | None = _RECORD, op: str = _OP,
                  size: str = _SIZE, iters: int = _ITERS, run_id: str | None = _RUN, as_json: bool = _JSON) -> None:
    """Name the slow link or node from per-link bandwidth and latency probes; time a collective before and after."""
    from slowlink.report.straggler import find_slow_lines, suspects_table

    if (emulated is None) == (record is None):
        raise SpecError(field_error("--emulated/--record", (emulated and str(emulated), record and str(record)),
                                    "give exactly one: a cluster file to emulate (root) or a `bench train` or "
                                    "`bench collectives` result"))
    if record is not None:
        from slowlink.bench.record import load_record
        from slowlink.probe.find import record_suspects

        suspects = record_suspects(load_record(record), str(record))
        if as_json:
            print_json({"suspects": [x.to_json() for x in suspects]})
            return
        out.print(suspects_table(suspects, f"the per-rank times of {record}"))
        return
    assert emulated is not None
    result = _find_emulated(emulated, op, size, iters, run_id)
    if as_json:
        print_json(result.to_json())
        return
    out.print(suspects_table(result.suspects, f"{len(result.streams)} streams and {len(result.rtts)} round trips"))
    for line in find_slow_lines(result):
        out.print(line, soft_wrap=True)


def _find_emulated(emulated: Path, op: str, size: str, iters: int, run_id: str | None) -> FindSlowResult:
    """Check the options, then run :func:`slowlink.probe.slow.find_slow_emulated` (root)."""
    from slowlink import units
    from slowlink.cli.emulate import check_emulated_size
    from slowlink.emulate import net
    from slowlink.errors import EmulationError
    from slowlink.probe.slow import find_slow_emulated
    from slowlink.progress import progress
    from slowlink.spec.cluster import load_cluster

    if op not in ("all_reduce", "all_to_all"):
        raise SpecError(field_error("--op", op, "must be all_reduce or all_to_all"))
    if iters < 1:
        raise SpecError(field_error("--iters", iters, "must be >= 1"))
    try:
        size_bytes = units.parse_size(size)
    except ValueError as exc:
        raise SpecError(f"--size: {exc}") from None
    c = load_cluster(emulated)
    check_emulated_size(size_bytes, [op], c.nodes)
    if run_id is not None and not run_id.isalnum():
        raise EmulationError(field_error("--run-id", run_id, "must be letters and digits only"))
    net.check_root()
    with progress("find-slow", 5) as steps:  # bring-up, healthy, inject and probe, degraded, tear-down
        return find_slow_emulated(c, op=op, size_bytes=size_bytes, iters=iters, run_id=run_id,
                                  on_step=steps.begin)


def register(app: typer.Typer, validate_app: typer.Typer) -> None:
    """Add this area's subcommands to the root app."""
    app.command("degraded")(degraded_cmd)
    app.command("jitter")(jitter_cmd)
    app.command("find-slow")(find_slow_cmd)
