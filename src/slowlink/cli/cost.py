"""CLI for the cost area: `slowlink bom`, `slowlink cost` and `slowlink search`."""

from __future__ import annotations

from pathlib import Path

import typer

from slowlink.cli.common import clean_errors, out, print_json

_JSON = typer.Option(False, "--json", help="Print JSON.")
_PRICES = typer.Option(None, "--prices", help="Your own quotes (same keys as cost/data/prices.yaml), "
                       "replacing the bundled entries they name.")


@clean_errors
def bom_cmd(cluster: Path, as_json: bool = _JSON, prices: Path | None = _PRICES) -> None:
    """Bill of materials of a cluster's fabric (switches, links, optics, NICs), its capex, power and network share."""
    from slowlink.cost.model import cluster_cost
    from slowlink.cost.prices import load_prices
    from slowlink.report.cost import bom_table, capex_table, cost_lines
    from slowlink.spec.cluster import load_cluster

    c = load_cluster(cluster)
    cost = cluster_cost(c, load_prices(prices))
    if as_json:
        print_json(cost.to_json())
        return
    out.print(bom_table(c.name, cost))
    out.print(capex_table(cost))
    for line in cost_lines(cost):
        out.print(line, soft_wrap=True)


@clean_errors
def cost_cmd(cluster: Path, workload: Path, as_json: bool = _JSON, prices: Path | None = _PRICES) -> None:
    """Cost per GPU-hour and per million tokens of a workload on a cluster (step model, before failures)."""
    from slowlink.cost.model import TokenCost, cluster_cost
    from slowlink.cost.prices import load_prices
    from slowlink.report.cost import capex_table, cost_lines, token_lines
    from slowlink.spec.cluster import load_cluster
    from slowlink.workload.spec import load_workload
    from slowlink.workload.step import plan

    c, w = load_cluster(cluster), load_workload(workload)
    book = load_prices(prices)
    result = plan(w, c)
    tc = TokenCost(cluster_cost(c, book), result.tokens_per_s, result.step_time_s)
    if as_json:
        print_json(tc.to_json() | {"bottleneck": result.bottleneck})
        return
    out.print(capex_table(tc.cost))
    for line in cost_lines(tc.cost) + token_lines(tc) + [f"bottleneck: {result.bottleneck}"]:
        out.print(line, soft_wrap=True)


def register(app: typer.Typer, validate_app: typer.Typer) -> None:
    """Add this area's subcommands to the root app."""
    app.command("bom")(bom_cmd)
    app.command("cost")(cost_cmd)
