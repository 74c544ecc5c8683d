"""Capex, power and hourly cost of a cluster, and its cost per token at the step model's throughput.

  capex        = servers + NICs + switches + optics + cables + network spares (+ the long haul's optics); a
                 cluster over sites sums its sites, each a fabric of its own nodes (two buildings share no switch)
  network      = NICs + switches + optics + cables + spares (+ long-haul optics)   (its share: network / capex)
  IT power     = servers (datasheet, NICs included) + switches + optics (+ long-haul optics)
  $/hour       = capex / (depreciation_years x 8,766 h) + IT kW x PUE x $/kWh (+ the long haul's lease)
  $/M tokens   = $/hour / (tokens/s x 3,600 x ETTR) x 1e6

ETTR (effective training time ratio: the share of wall time that makes progress, after failures, restarts
and checkpoints) comes from the failure model; where it could not be priced the cost is "before failures"
(:data:`BEFORE_FAILURES`, ETTR 1). :func:`usd_per_million_tokens` is the one seam where it multiplies in.
Sources of every price: ``cost/data/prices.yaml``; the long haul of a cluster with sites: :mod:`slowlink.cost.dci`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from slowlink import units
from slowlink.cost.bom import Bom, bill_of_materials, site_boms
from slowlink.cost.dci import DciBill, dci_bill
from slowlink.errors import PriceMissing
from slowlink.spec.cluster import Cluster
from slowlink.spec.prices import PriceBook

HOURS_PER_YEAR = units.YEAR / units.HOUR
T = TypeVar("T")


@dataclass(frozen=True)
class ClusterCost:
    """What a cluster costs to buy and to run, with its bill of materials."""

    bom: Bom
    gpus: int
    capex_usd: dict[str, float]     # servers, nics, switches, optics, cables, spares
    power_w: dict[str, float]       # servers, switches, optics (IT power)
    pue: float
    usd_per_kwh: float
    depreciation_years: float
    switch_usd: dict[str, float] = field(default_factory=dict)  # capex["switches"] by tier (leaf, spine, ...)
    excluded: tuple[str, ...] = ()  # parts the price book has no price for (a partial bill): each in words
    dci: DciBill | None = None      # the long haul between sites (None: one site, or its lease unpriced)

    @property
    def complete(self) -> bool:
        """Every part is priced: the totals are the cluster's, not a bill that excludes some lines."""
        return not self.excluded

    @property
    def total_capex_usd(self) -> float:
        return sum(self.capex_usd.values())

    @property
    def network_capex_usd(self) -> float:
        return self.total_capex_usd - self.capex_usd["servers"]

    @property
    def network_share(self) -> float:
        """Network capex / total capex (0 when nothing could be priced)."""
        return self.network_capex_usd / self.total_capex_usd if self.total_capex_usd else 0.0

    @property
    def it_power_w(self) -> float:
        return sum(self.power_w.values())

    @property
    def facility_power_w(self) -> float:
        return self.it_power_w * self.pue

    @property
    def usd_per_hour(self) -> float:
        """Capex amortised straight-line plus electricity at the facility's PUE."""
        capex = self.total_capex_usd / (self.depreciation_years * HOURS_PER_YEAR)
        lease = 0.0 if self.dci is None else self.dci.lease_usd_per_hour
        return capex + self.facility_power_w / 1e3 * self.usd_per_kwh + lease

    @property
    def usd_per_gpu_hour(self) -> float:
        return self.usd_per_hour / self.gpus

    def to_json(self) -> dict[str, object]:
        b = self.bom.to_json()
        return {**b, "power_w": self.it_power_w, "facility_power_w": self.facility_power_w,
                "power_breakdown_w": self.power_w, "capex_usd": self.total_capex_usd,
                "capex_breakdown_usd": self.capex_usd, "network_capex_usd": self.network_capex_usd,
                "network_share": self.network_share, "capex_per_gpu_usd": self.total_capex_usd / self.gpus,
                "usd_per_hour": self.usd_per_hour, "usd_per_gpu_hour": self.usd_per_gpu_hour,
                **({"excluded": list(self.excluded)} if self.excluded else {}),
                **({"dci": self.dci.to_json()} if self.dci is not None else {})}


def _family(cluster: Cluster) -> str:
    """Switch family of a transport: RoCE and plain Ethernet run on Ethernet switches."""
    return "infiniband" if cluster.fabric.transport.kind == "infiniband" else "ethernet"


def cluster_cost(cluster: Cluster, prices: PriceBook, strict: bool = True) -> ClusterCost:
    """Price ``cluster``'s servers and its bill of materials (module docstring for the formulas).

    ``strict``: a part without a price raises :class:`~slowlink.errors.PriceMissing` (what a design search and
    the chain's cost per token need). Not strict (``bom``, ``cost``): every part that can be is priced, each one
    that cannot is named in ``excluded`` and left out of the totals (a server without a price: its rack layout is
    bill_of_materials' default, its power unknown)."""
    if cluster.sites is not None:
        return _sites_cost(cluster, prices, strict)
    excluded: list[str] = []

    def price(lookup: Callable[..., T], *args: Any) -> T | None:
        try:
            return lookup(*args)
        except PriceMissing as exc:
            if strict:
                raise
            excluded.append(str(exc))
            return None

    server = price(prices.server, cluster.gpu.name)
    bom = bill_of_materials(cluster, server.nodes_per_rack) if server else bill_of_materials(cluster)
    nodes = cluster.gpus / server.gpus if server else 0.0
    capex = {"servers": nodes * server.price_usd if server else 0.0, "nics": 0.0, "switches": 0.0, "optics": 0.0,
             "cables": 0.0}
    power = {"servers": nodes * server.power_w if server else 0.0, "switches": 0.0, "optics": 0.0}
    for role, count in bom.nics.items():
        nic = cluster.compute_nics if role == "compute" else cluster.storage_nics
        if count and nic is not None and (n := price(prices.nic, nic.speed_bytes_s / units.Gbit)) is not None:
            capex["nics"] += count * n.price_usd
    switch_usd: dict[str, float] = {}
    for tier, count in bom.switches.items():  # a separate storage fabric's switches run at its own line rate
        if count:
            sw = price(prices.switch, _family(cluster), bom.storage_speed_gbit_s if tier == "storage" else
                       bom.speed_gbit_s, bom.switch_radix)
            if sw is not None:
                switch_usd[tier] = count * sw.price_usd
                power["switches"] += count * sw.power_w
    capex["switches"] = sum(switch_usd.values())
    for medium, links in bom.cables.items():
        m = price(prices.medium, medium)
        if m is None:
            continue
        ends = 1 if medium == "dac" else 2
        capex["optics" if ends == 2 else "cables"] += links * ends * m.price_usd
        capex["cables"] += links * m.fiber_usd
        power["optics"] += links * ends * m.power_w
    spares = prices.facility.network_spares_fraction
    capex["spares"] = spares * (capex["switches"] + capex["optics"] + capex["cables"])
    fac = prices.facility
    return ClusterCost(bom, cluster.gpus, capex, power, fac.pue, fac.usd_per_kwh, fac.depreciation_years,
                       switch_usd, tuple(dict.fromkeys(excluded)))


def _sites_cost(cluster: Cluster, prices: PriceBook, strict: bool) -> ClusterCost:
    """A cluster over sites: each site priced as a cluster of its nodes on its own fabric (its ``fabric:``, else
    the cluster's; the storage and its fabric with the first site), summed, then the long haul."""
    sites = cluster.sites
    if sites is None:  # site fabrics come only with sites (spec/cluster.py)
        raise ValueError("site fabrics without sites")
    own = dict(cluster.site_fabrics)
    parts = []
    for i, s in enumerate(sites.sites):
        one = replace(cluster, name=s.name, nodes=s.nodes, fabric=own.get(s.name, cluster.fabric), sites=None,
                      site_fabrics=(), storage=cluster.storage if i == 0 else None)
        parts.append((s.name, cluster_cost(one, prices, strict)))
    capex: dict[str, float] = {}
    power: dict[str, float] = {}
    for _, c in parts:
        for k, v in c.capex_usd.items():
            capex[k] = capex.get(k, 0.0) + v
        for k, v in c.power_w.items():
            power[k] = power.get(k, 0.0) + v
    excluded = [x for _, c in parts for x in c.excluded]
    try:
        dci = dci_bill(sites, prices)
    except PriceMissing as exc:
        if strict:
            raise
        excluded.append(str(exc))
        dci = None
    if dci is not None:
        capex["dci_optics"], power["dci_optics"] = dci.optics_usd, dci.optics_power_w
    fac = prices.facility
    switch_usd = {f"{name} {tier}": usd for name, c in parts for tier, usd in c.switch_usd.items()}
    return ClusterCost(site_boms([(name, c.bom) for name, c in parts]), cluster.gpus, capex, power, fac.pue,
                       fac.usd_per_kwh, fac.depreciation_years, switch_usd, tuple(dict.fromkeys(excluded)), dci)


# The basis of a cost per token whose failures could not be priced (no storage to price the checkpoint, ...):
# the throughput is taken at ETTR 1. Every command and report says it with these words.
BEFORE_FAILURES = "before failures"


def usd_per_million_tokens(usd_per_hour: float, tokens_per_s: float, ettr: float = 1.0) -> float:
    """Cost of a million trained tokens: ``$/hour / (tokens/s x 3600 x ETTR) x 1e6``.

    ``ettr`` (0, 1] is the goodput seam: 1 = before failures; the failure model's ETTR multiplies in here.
    """
    if not 0.0 < ettr <= 1.0 or not math.isfinite(tokens_per_s) or tokens_per_s <= 0:
        raise ValueError(f"ettr ({ettr}) must be in (0, 1] and tokens_per_s ({tokens_per_s}) > 0")
    return usd_per_hour / (tokens_per_s * units.HOUR * ettr) * 1e6


@dataclass(frozen=True)
class TokenCost:
    """A cluster's cost per token for one workload, at the step model's throughput x the failure model's
    ``priced_ettr`` (None where failures could not be priced: :data:`BEFORE_FAILURES`, ETTR 1)."""

    cost: ClusterCost
    tokens_per_s: float
    step_time_s: float
    priced_ettr: float | None = None

    @property
    def ettr(self) -> float:
        """The ETTR the cost is priced at: the failure model's, or 1 before failures."""
        return 1.0 if self.priced_ettr is None else self.priced_ettr

    @property
    def basis(self) -> str:
        """``before failures`` or ``x ETTR 0.97``: what the throughput was multiplied by."""
        return BEFORE_FAILURES if self.priced_ettr is None else f"x ETTR {self.priced_ettr:g}"

    @property
    def usd_per_million_tokens(self) -> float:
        return usd_per_million_tokens(self.cost.usd_per_hour, self.tokens_per_s, self.ettr)

    def to_json(self) -> dict[str, object]:
        basis = f"{BEFORE_FAILURES} (ETTR 1)" if self.priced_ettr is None else self.basis
        return {**self.cost.to_json(), "tokens_per_s": self.tokens_per_s, "step_time_s": self.step_time_s,
                "ettr": self.ettr, "usd_per_million_tokens": self.usd_per_million_tokens,
                "basis": f"step-model throughput{',' if self.priced_ettr is None else ''} {basis}"}
