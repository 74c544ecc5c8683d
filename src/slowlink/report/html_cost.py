"""The HTML pages of ``slowlink cost`` and ``slowlink bom``: where the capex goes, the network's share of it,
the bill of materials, and what a GPU-hour and a million tokens cost.

Draws the :class:`~slowlink.cost.model.ClusterCost` (and for ``cost`` the :class:`~slowlink.cost.model.TokenCost`)
the command computed; the page scaffolding is :mod:`slowlink.report.page`'s, the rows are
:mod:`slowlink.report.cost`'s (the same as the terminal tables).
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from slowlink.cost.model import BEFORE_FAILURES
from slowlink.report.cost import bom_rows, bom_title, capex_rows, cost_lines, token_lines
from slowlink.report.page import figure_block, figure_svg, html_page, html_table, inputs_block, new_figure, write_page

if TYPE_CHECKING:
    from slowlink.cost.model import ClusterCost, TokenCost
    from slowlink.spec.cluster import Cluster
    from slowlink.spec.workload import Workload

SERVERS_COLOUR = "#4c72b0"
NETWORK_COLOURS = ("#dd8452", "#c44e52", "#e17c7c", "#8172b3", "#937860", "#da8bc3", "#8c8c8c", "#ccb974")


@dataclass(frozen=True)
class RunCost:
    """What ``slowlink cost`` adds to a cluster's cost: the workload, its token cost and step bottleneck, and
    with a token budget the run's days and USD (the assessment's: :mod:`slowlink.assess`)."""

    workload: Workload
    token: TokenCost
    bottleneck: str
    tokens: float | None = None
    days: float | None = None
    run_usd: float | None = None


def capex_parts(cost: ClusterCost) -> list[tuple[str, float]]:
    """Capex by part, switches split by tier: servers first, then the network's parts (NICs, switches, ...)."""
    parts: list[tuple[str, float]] = []
    for part, usd in cost.capex_usd.items():
        if part == "switches" and cost.switch_usd:
            parts += [(f"{tier} switches", v) for tier, v in cost.switch_usd.items()]
        else:
            parts.append(("NICs" if part == "nics" else part, usd))
    return parts


def capex_svg(cost: ClusterCost, salt: str = "capex") -> str:
    """Top: one stacked bar of the whole capex (servers vs each network part). Bottom: the network's parts in
    USD, each with its share of capex (they are thin slivers next to the servers)."""
    parts = capex_parts(cost)
    total = cost.total_capex_usd
    net = [(name, usd) for name, usd in parts if name != "servers"]
    colours = {name: NETWORK_COLOURS[i % len(NETWORK_COLOURS)] for i, (name, _) in enumerate(net)}
    colours["servers"] = SERVERS_COLOUR
    with new_figure(salt, 11, 2.2 + 0.35 * len(net), nrows=2,
                 gridspec_kw={"height_ratios": [1, max(1.5, 0.35 * len(net))]}) as (fig, (top, bottom)):
        left = 0.0
        for name, usd in parts:
            share = usd / total * 100
            top.barh(0, share, left=left, color=colours[name], height=0.6, label=name)
            if share >= 4:
                top.text(left + share / 2, 0, f"{name}\n{share:.1f}%", ha="center", va="center", color="white",
                         fontsize=8)
            left += share
        top.set_xlim(0, 100)
        top.set_yticks([])
        top.set_xlabel("share of capex (%)")
        top.set_title(f"network: {cost.network_capex_usd:,.0f} USD = {cost.network_share:.1%} of "
                      f"{total:,.0f} USD capex", fontsize=10)
        top.legend(loc="upper left", bbox_to_anchor=(1.0, 1.3), frameon=False, fontsize=8)
        vals = [usd / 1e3 for _, usd in net]
        bottom.barh(range(len(net)), vals, color=[colours[n] for n, _ in net], height=0.6)
        for i, (_, usd) in enumerate(net):
            bottom.text(usd / 1e3, i, f"  {usd:,.0f} USD, {usd / total:.1%}", va="center", fontsize=8)
        bottom.set_yticks(range(len(net)), [n for n, _ in net])
        bottom.invert_yaxis()
        bottom.set_xlim(0, max(vals, default=1) * 1.45)
        bottom.set_xlabel("network capex by part (thousand USD)")
        for ax in (top, bottom):
            ax.spines[["top", "right"]].set_visible(False)
        return figure_svg(fig, salt)


def headline_rows(cost: ClusterCost, run: RunCost | None) -> list[tuple[str, str]]:
    """The numbers people ask for first: capex, the network's share, power, $/GPU-hour (and per token)."""
    rows = [("capex", f"{cost.total_capex_usd:,.0f} USD"),
            ("network capex (NICs, switches, optics, cables, spares)", f"{cost.network_capex_usd:,.0f} USD"),
            ("network share of capex", f"{cost.network_share:.1%}"),
            ("capex per GPU", f"{cost.total_capex_usd / cost.gpus:,.0f} USD"),
            ("IT / facility power", f"{cost.it_power_w / 1e3:,.1f} / {cost.facility_power_w / 1e3:,.1f} kW"),
            ("USD per hour", f"{cost.usd_per_hour:,.2f}"),
            ("USD per GPU-hour", f"{cost.usd_per_gpu_hour:.3f}")]
    if run is not None:
        tc = run.token
        rows += [("tokens/s (step model)", f"{tc.tokens_per_s:,.0f}"), ("step time", f"{tc.step_time_s:.3f} s"),
                 ("ETTR (failures, checkpoints)",
                  f"1 ({BEFORE_FAILURES})" if tc.priced_ettr is None else f"{tc.ettr:.4f}"),
                 ("USD per million tokens", f"{tc.usd_per_million_tokens:.4f}")]
        if run.tokens is not None and run.days is not None and run.run_usd is not None:
            rows += [(f"{run.tokens:.3g} tokens", f"{run.days:.1f} days, {run.run_usd:,.0f} USD")]
    return rows


def cost_page(cluster: Cluster, cost: ClusterCost, run: RunCost | None = None) -> str:
    """The page of ``slowlink cost`` (with ``run``) or ``slowlink bom``: summary, capex figure, tables, inputs."""
    lines = cost_lines(cost) + ([*token_lines(run.token), f"bottleneck: {run.bottleneck}"] if run else [])
    summary = "".join(f'<span class="sentence">{html.escape(x)}</span><br>' for x in lines)
    fig = figure_block(capex_svg(cost), "Where the capex goes: servers against the network, and the network's "
                        "parts (switches per tier) with their share of the whole.", "capex")
    body = (f'<h2>Summary</h2><div class="bottleneck"><b>{html.escape(cluster.name)}</b>{summary}</div>'
            f"{html_table(('', 'value'), headline_rows(cost, run), 'metrics')}"
            f"<h2>Capex</h2>{fig}{html_table(('part', 'USD', 'share', 'IT power (kW)'), capex_rows(cost))}"
            f"<h2>Bill of materials</h2><p>{html.escape(bom_title(cluster.name, cost))}</p>"
            f"{html_table(('item', 'count', 'detail'), bom_rows(cost))}"
            f"{inputs_block([cluster], run.workload if run else None)}")
    what = f"slowlink cost: {run.workload.name} on {cluster.name}" if run else f"slowlink bom: {cluster.name}"
    return html_page(what, body)


def write_cost(path: Path, cluster: Cluster, cost: ClusterCost, run: RunCost | None = None) -> None:
    write_page(path, cost_page(cluster, cost, run))
