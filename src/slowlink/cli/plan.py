"""CLI for the plan area: `slowlink plan` and `slowlink validate` (published runs)."""

from __future__ import annotations

from pathlib import Path

import typer

from slowlink.cli.common import clean_errors, out, print_json
from slowlink.errors import SpecError
from slowlink.spec.cluster import load_cluster
from slowlink.workload.spec import load_workload
from slowlink.workload.step import plan

_FILES = typer.Argument(..., help="CLUSTER.yaml WORKLOAD.yaml, or clusters with --workload.")
_WORKLOAD = typer.Option(None, "--workload", help="Workload file for several clusters.")
_JSON = typer.Option(False, "--json", help="Print JSON.")


@clean_errors
def plan_cmd(
    files: list[Path] = _FILES,
    workload: Path | None = _WORKLOAD,
    as_json: bool = _JSON,
) -> None:
    """Predict step time, MFU, memory and the bottleneck of a workload on one or more clusters."""
    from slowlink.report.plan import plan_table

    if workload is None:
        if len(files) != 2:
            raise SpecError(f"plan: got {len(files)} files: give CLUSTER.yaml WORKLOAD.yaml, or --workload")
        clusters, wpath = [files[0]], files[1]
    else:
        clusters, wpath = list(files), workload
    w = load_workload(wpath)
    loaded = [load_cluster(c) for c in clusters]
    results = [plan(w, c) for c in loaded]
    if as_json:
        print_json(results[0].to_json() if len(results) == 1 else
                   {c.name: r.to_json() for c, r in zip(loaded, results, strict=True)})
    else:
        out.print(plan_table([c.name for c in loaded], results))


@clean_errors
def validate_runs(ctx: typer.Context) -> None:
    """Model every published run and print predicted vs measured step time, the mean and max error."""
    if ctx.invoked_subcommand is not None:
        return
    from slowlink.report.plan import validate_table
    from slowlink.workload.validate import cases

    cs = cases()
    out.print(validate_table(cs))
    errs = [abs(c.error) for c in cs]
    out.print(f"step-time error: mean {sum(errs) / len(errs):.1%}, max {max(errs):.1%} over {len(cs)} cases")


_NODES = typer.Option("1,2,4,8", "--nodes", help="Node counts, comma separated.")
_MODE = typer.Option("global-batch", "--mode", help="global-batch or per-gpu-batch.")


@clean_errors
def scale_cmd(cluster: Path, workload: Path, nodes: str = _NODES, mode: str = _MODE,
              as_json: bool = _JSON) -> None:
    """Per-GPU throughput, scaling efficiency and comm/compute ratio at each node count."""
    from slowlink.workload.scale import scale

    if mode not in ("global-batch", "per-gpu-batch"):
        raise SpecError(f"--mode ({mode!r}) must be global-batch or per-gpu-batch")
    try:
        counts = [int(x) for x in nodes.split(",")]
    except ValueError:
        raise SpecError(f"--nodes ({nodes!r}) must be comma-separated integers, e.g. 1,2,4,8") from None
    pts = scale(load_workload(workload), load_cluster(cluster), counts, mode)
    rows = [{"nodes": p.nodes, "tokens_per_s_per_gpu": p.tokens_per_s_per_gpu, "scaling_efficiency": p.efficiency,
             **p.result.to_json()} for p in pts]
    if as_json:
        print_json(rows)
        return
    for p in pts:
        ratio = sum(p.result.comm_s.values()) / p.result.compute_s
        out.print(f"{p.nodes:>5} nodes  {p.tokens_per_s_per_gpu:>10,.0f} tok/s/GPU  eff {p.efficiency:.1%}  "
                  f"comm/compute {ratio:.2f}  exposed DP gradient reduction {p.result.comm_s['dp']:.3f} s",
                  soft_wrap=True)


def register(app: typer.Typer, validate_app: typer.Typer) -> None:
    """Add this area's subcommands to the root app and to `slowlink validate`."""
    app.command("plan")(plan_cmd)
    app.command("scale")(scale_cmd)
    validate_app.callback(invoke_without_command=True)(validate_runs)
