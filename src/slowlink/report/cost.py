"""Rendering of the cost model: the bill of materials, the capex and power breakdown, cost per token."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

if TYPE_CHECKING:
    from slowlink.cost.model import ClusterCost, TokenCost


def bom_rows(cost: ClusterCost) -> list[tuple[str, str, str]]:
    """(item, count, detail) of the bill of materials: switches and links per tier, optics, NICs."""
    b = cost.bom
    rows = [(f"{tier} switches", f"{n:,}", "") for tier, n in b.switches.items()]
    rows += [(f"{tier} links", f"{n:,}", b.media[tier]) for tier, n in b.links.items()]
    rows += [("transceivers", f"{n:,}", kind) for kind, n in b.transceivers.items()]
    rows += [(f"{role} NICs", f"{n:,}", "") for role, n in b.nics.items()]
    d = cost.dci
    if d is not None:
        rows.append(("long-haul links", f"{d.links:g}", f"{d.speed_gbit_s:g} Gb/s between {d.sites} sites, "
                     f"~{d.route_km:,.0f} km"))
        if d.optics is not None:
            rows.append(("long-haul transceivers", f"{d.transceivers:,}", d.optics))
    return rows


def bom_title(name: str, cost: ClusterCost) -> str:
    b = cost.bom
    return (f"bill of materials: {name} ({cost.gpus} GPUs, {b.topology}, {b.switch_radix}-port switches at "
            f"{b.speed_gbit_s:g} Gb/s)")


def bom_table(name: str, cost: ClusterCost) -> Table:
    """Switches, links, optics and NICs, with what they cost."""
    table = Table(title=bom_title(name, cost))
    table.add_column("item")
    table.add_column("count", justify="right")
    table.add_column("detail")
    for row in bom_rows(cost):
        table.add_row(*row)
    return table


def share_table(rows: list[tuple[str, int, ClusterCost]]) -> Table:
    """The network's share of capex of the reference designs (:func:`slowlink.cost.design.network_share_table`)."""
    table = Table(title="network share of capex (8 x 400G NICs per 8-GPU server, bundled prices)")
    for col in ("fabric", "GPUs", "tiers", "switches (leaf/spine/core)", "optics", "network USD/GPU",
                "network share", "facility MW"):
        table.add_column(col, justify="left" if col == "fabric" else "right")
    for name, gpus, c in rows:
        table.add_row(name, f"{gpus:,}", str(len(c.bom.switches)), "/".join(map(str, c.bom.switches.values())),
                      f"{sum(c.bom.transceivers.values()):,}", f"{c.network_capex_usd / gpus:,.0f}",
                      f"{c.network_share:.1%}", f"{c.facility_power_w / 1e6:.1f}")
    return table


def share_json(rows: list[tuple[str, int, ClusterCost]]) -> list[dict[str, object]]:
    return [{"fabric": name, "gpus": gpus, "switches": c.bom.switches, "links": c.bom.links,
             "transceivers": c.bom.transceivers, "network_capex_usd": c.network_capex_usd,
             "capex_usd": c.total_capex_usd, "network_share": c.network_share} for name, gpus, c in rows]


def capex_rows(cost: ClusterCost) -> list[tuple[str, str, str, str]]:
    """(part, USD, share, IT kW) of every capex part, then the total."""
    total = cost.total_capex_usd
    rows = []
    for part, usd in cost.capex_usd.items():
        kw = cost.power_w.get(part)
        rows.append((part, f"{usd:,.0f}", f"{usd / total:.1%}", "-" if kw is None else f"{kw / 1e3:,.1f}"))
    return [*rows, ("total", f"{total:,.0f}", "100%", f"{cost.it_power_w / 1e3:,.1f}")]


def capex_table(cost: ClusterCost) -> Table:
    """Capex by part, its share, and the power each part draws."""
    table = Table(title="capex and power")
    for col in ("part", "USD", "share", "IT power (kW)"):
        table.add_column(col, justify="right")
    for row in capex_rows(cost):
        table.add_row(*row)
    return table


def cost_lines(cost: ClusterCost) -> list[str]:
    """The headline numbers under the tables; a partial bill says first what its totals exclude."""
    lines = [f"excluding (no price): {why}" for why in cost.excluded]
    haul = "" if cost.dci is None else ", long-haul optics"
    lines += [f"network (NICs, switches, optics, cables, spares{haul}): {cost.network_capex_usd:,.0f} USD = "
              f"{cost.network_share:.1%} of capex; capex per GPU {cost.total_capex_usd / cost.gpus:,.0f} USD",
              f"facility power {cost.facility_power_w / 1e3:,.0f} kW (PUE {cost.pue:g}); "
              f"{cost.usd_per_hour:,.2f} USD/hour = {cost.usd_per_gpu_hour:.3f} USD per GPU-hour "
              f"({cost.depreciation_years:g}-year straight-line capex + electricity at {cost.usd_per_kwh:g} "
              f"USD/kWh){'' if cost.complete else ', excluding the parts above'}"]
    d = cost.dci
    if d is not None:
        lines.append(f"long haul: {d.capacity_gbit_s:g} Gbit/s leased at {d.lease_usd_per_month:,.0f} USD/month = "
                     f"{d.lease_usd_per_hour:,.2f} USD/hour, in the USD/hour above")
    lines += [f"note: {n}" for n in cost.bom.notes + (() if d is None else d.notes)]
    return lines


def token_lines(tc: TokenCost) -> list[str]:
    """Cost per token, labelled with its basis."""
    return [f"throughput {tc.tokens_per_s:,.0f} tokens/s (step {tc.step_time_s:.3f} s, step model)",
            f"{tc.usd_per_million_tokens:.4f} USD per million tokens ({tc.basis}"
            f"{'' if tc.cost.complete else ', excluding the unpriced parts above'})"]
