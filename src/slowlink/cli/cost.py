"""CLI for the cost area: `slowlink bom`, `slowlink cost` and `slowlink search`."""

from __future__ import annotations

from pathlib import Path

import typer

from slowlink.cli.common import clean_errors, err, out, parse_budget, print_json

_JSON = typer.Option(False, "--json", help="Print JSON.")
_PRICES = typer.Option(None, "--prices", help="Your own quotes (same keys as cost/data/prices.yaml), "
                       "replacing the bundled entries they name.")
_HTML = typer.Option(None, "--html", help="Also write a self-contained HTML report with figures to this file.")


_CLUSTER = typer.Argument(None, help="Cluster file (omit with --reference).")
_REFERENCE = typer.Option(False, "--reference", help="Instead of a cluster: the network's share of capex at 1k, 8k "
                          "and 32k H100s on IB NDR fat tree and RoCE rail-optimized 1:1 and 2:1.")


@clean_errors
def bom_cmd(cluster: Path | None = _CLUSTER, as_json: bool = _JSON, prices: Path | None = _PRICES,
            reference: bool = _REFERENCE, html: Path | None = _HTML) -> None:
    """Bill of materials of a cluster's fabric (switches, links, optics, NICs), its capex, power and network share."""
    from slowlink.cost.model import cluster_cost
    from slowlink.cost.prices import load_prices
    from slowlink.errors import SpecError
    from slowlink.report.cost import bom_table, capex_table, cost_lines, share_json, share_table
    from slowlink.report.html import check_html_path
    from slowlink.spec.cluster import load_cluster

    if (cluster is None) == (not reference):
        raise SpecError("bom: give a CLUSTER.yaml or --reference (not both)")
    if reference and html is not None:
        raise SpecError("bom: --html draws one cluster's bill of materials: give a CLUSTER.yaml, not --reference")
    check_html_path(html)
    if cluster is None:
        from slowlink.cost.design import network_share_table

        rows = network_share_table(load_prices(prices))
        if as_json:
            print_json(share_json(rows))
        else:
            out.print(share_table(rows))
        return
    c = load_cluster(cluster)
    cost = cluster_cost(c, load_prices(prices), strict=False)  # what has a price, and the parts that have none
    if html is not None:
        from slowlink.report.html_cost import write_cost

        write_cost(html, c, cost)
    if as_json:
        print_json(cost.to_json())
        return
    out.print(bom_table(c.name, cost))
    out.print(capex_table(cost))
    for line in cost_lines(cost):
        out.print(line, soft_wrap=True)


_TOKENS = typer.Option(None, "--tokens", help="Token budget of the run (e.g. 1.5T or 1.5e12; default: the workload's "
                       "training.tokens): adds its days and cost.")


_STEPS = typer.Option(None, "--steps", help="Training steps instead of a token budget.")


@clean_errors
def cost_cmd(cluster: Path, workload: Path, as_json: bool = _JSON, prices: Path | None = _PRICES,
             tokens: str | None = _TOKENS, steps: int | None = _STEPS, html: Path | None = _HTML) -> None:
    """Cost per GPU-hour and per million tokens of a workload on a cluster (step model with its data stall x ETTR
    from the failure model)."""
    from slowlink.assess import assess
    from slowlink.cost.model import cluster_cost
    from slowlink.cost.prices import load_prices
    from slowlink.report.cost import capex_table, cost_lines, token_lines
    from slowlink.report.html import check_html_path
    from slowlink.spec.cluster import load_cluster
    from slowlink.spec.workload import load_workload

    budget = parse_budget(tokens, steps)
    check_html_path(html)
    c, w = load_cluster(cluster), load_workload(workload)
    book = load_prices(prices)
    bill = cluster_cost(c, book, strict=False)  # every part with a price; those without are excluded and named
    a = assess(w, c, budget=budget, prices=book, full=False, hardware=bill)
    tc = a.priced_token_cost()
    if html is not None:
        from slowlink.report.html_cost import RunCost, write_cost

        write_cost(html, c, tc.cost, RunCost(a.workload, tc, a.bottleneck, a.tokens, a.run_days, a.run_usd))
    if as_json:
        print_json(a.priced_json())
        return
    out.print(capex_table(tc.cost))
    lines = cost_lines(tc.cost) + token_lines(tc) + [f"bottleneck: {a.bottleneck}"]
    if a.tokens is not None and a.run_days is not None and a.run_usd is not None:
        lines.append(f"{a.tokens:.3g} tokens: {a.run_days:.1f} days, {a.run_usd:,.0f} USD")
    lines.append(f"throughput: step model {a.ettr_basis}")
    lines += [u.sentence() for u in a.unpriced if u.part not in ("failures", "cost")]  # said above
    for line in lines:
        out.print(line, soft_wrap=True)


_WORKERS = typer.Option(2, "--workers", help="Dask LocalCluster worker processes (0: evaluate in this process).")
_SCHEDULER = typer.Option(None, "--scheduler", help="Address of a running Dask scheduler instead of a LocalCluster.")
_OUT = typer.Option(None, "--out", help="Write every configuration to this .csv or .parquet file.")
_PLOT = typer.Option(None, "--plot", help="Write the Pareto front (run cost vs days) to this .png or .svg file.")
_EMIT = typer.Option(None, "--emit", help="Write the cheapest design's cluster.yaml and workload.yaml (and the "
                     "space's prices.yaml) into this folder, for plan, cost and goodput.")
_RESUME = typer.Option(None, "--resume", help="Keep each finished chunk in this folder; a rerun skips the chunks "
                       "already there.")


@clean_errors
def search_cmd(space: Path, as_json: bool = _JSON, workers: int = _WORKERS, scheduler: str | None = _SCHEDULER,
               out_file: Path | None = _OUT, plot: Path | None = _PLOT, resume: Path | None = _RESUME,
               html: Path | None = _HTML, emit_dir: Path | None = _EMIT) -> None:
    """Search a design space on Dask: the cheapest design per token and the Pareto front of cost vs time to train."""
    from slowlink.errors import InfeasiblePlan, SpecError
    from slowlink.fileio import check_output
    from slowlink.progress import progress
    from slowlink.report import search as report
    from slowlink.report.html import check_html_path
    from slowlink.search.run import chunks, evaluate_space, summarize
    from slowlink.search.space import load_space

    if workers < 0:
        raise SpecError(f"--workers ({workers}) must be >= 0")
    for path, flag, suffixes in ((out_file, "--out", (".csv", ".parquet")), (plot, "--plot", (".png", ".svg"))):
        if path is not None:
            check_output(path, flag, suffixes)
    check_html_path(html)
    if emit_dir is not None:
        from slowlink.search.emit import check_emit_dir

        check_emit_dir(emit_dir)
    s = load_space(space)
    with progress(f"{s.size:,} configurations", len(chunks(s))) as steps:
        points = evaluate_space(s, workers, scheduler, steps.advance, resume)
    result = summarize(s, points)
    if out_file is not None:
        report.write_points(result, out_file)
    if html is not None:  # written even when nothing is feasible: its table says which rule removed what
        from slowlink.report.html_search import write_search

        write_search(html, result)
    if not result.feasible:
        raise InfeasiblePlan(report.empty_message(result))
    if plot is not None:
        report.write_plot(result, plot)
    if emit_dir is not None and result.best is not None:
        from slowlink.search.emit import emit

        written = emit(s, result.best, emit_dir)
        err.print(f"wrote the cheapest design: {written.command('cost')}", soft_wrap=True)
    if as_json:
        print_json(report.search_json(result))
        return
    out.print(report.front_table(result))
    for line in report.summary_lines(result):
        out.print(line, soft_wrap=True)


def register(app: typer.Typer, validate_app: typer.Typer) -> None:
    """Add this area's subcommands to the root app."""
    app.command("bom")(bom_cmd)
    app.command("cost")(cost_cmd)
    app.command("search")(search_cmd)
