"""Cluster designs from a few knobs: the server of a GPU (price book), NICs, transport, topology and ratio,
on the fewest switch tiers that fit; and the reference network-share table (1k, 8k, 32k GPUs).

A design's fabric uses the price book's switch for its transport family and NIC speed (the largest radix
priced); tiers are the fewest (1, 2 or 3) whose bill of materials has no note (every logical switch fits
one box, :mod:`slowlink.cost.bom`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slowlink.cost.bom import bill_of_materials
from slowlink.cost.model import ClusterCost, cluster_cost
from slowlink.errors import FabricMisfit, PriceMissing, SpecError
from slowlink.spec.cluster import Cluster, cluster_from_mapping
from slowlink.spec.prices import PriceBook


@dataclass(frozen=True)
class Design:
    """The hardware knobs of one design (what `slowlink search` sweeps)."""

    gpu: str
    nodes: int
    nics_per_node: int
    nic_speed_gbit_s: float
    transport: str            # infiniband | roce
    topology: str             # fat-tree | rail-optimized
    oversubscription: float   # at the leaf
    sites: int = 1            # sites the nodes are split into, equal shares (1: no long haul)
    dci_links: int = 0        # long-haul links leaving each site (0 with one site)

    def label(self) -> str:
        haul = f" over {self.sites} sites x{self.dci_links} DCI links" if self.sites > 1 else ""
        return (f"{self.nodes}x{self.gpu} {self.nics_per_node}x{self.nic_speed_gbit_s:g}G {self.transport} "
                f"{self.topology} {self.oversubscription:g}:1{haul}")


def _radix(d: Design, prices: PriceBook) -> int:
    family = "infiniband" if d.transport == "infiniband" else "ethernet"
    radices = [s.radix for s in prices.switches if s.transport == family and s.speed_gbit_s == d.nic_speed_gbit_s]
    if not radices:
        raise PriceMissing(f"prices: switches: no {family} switch at {d.nic_speed_gbit_s:g} Gbit/s is priced")
    return max(radices)


def design_mapping(d: Design, prices: PriceBook, tiers: int, shared: Mapping[str, Any] | None = None
                   ) -> dict[str, Any]:
    """The cluster file of ``d`` with ``tiers`` switch tiers, and the ``shared`` sections every design has (e.g.
    storage: and reliability:); a shared ``interconnect:`` joins the sites of a design split over several
    (``site1``, ``site2``... of equal nodes, ``d.dci_links`` links each) and is left out of a one-site one."""
    server = prices.server(d.gpu)
    ratio: float | list[float] = d.oversubscription if tiers < 3 else [d.oversubscription, 1, 1]
    common = dict(shared or {})
    interconnect = common.pop("interconnect", None)
    data = {"name": d.label(), "nodes": d.nodes, "gpus_per_node": server.gpus, "gpu": d.gpu,
            "scale_up": {"link": server.scale_up.link, "domain_gpus": server.scale_up.domain_gpus},
            "nics": {"compute": {"per_node": d.nics_per_node, "speed_gbit_s": d.nic_speed_gbit_s}},
            "fabric": {"transport": d.transport, "topology": d.topology, "tiers": tiers,
                       "oversubscription": ratio, "switch_radix": _radix(d, prices)}} | common
    if d.sites > 1:
        if interconnect is None:
            raise SpecError(f"{d.label()}: sites ({d.sites}) need the interconnect that joins them")
        if d.nodes % d.sites:
            raise SpecError(f"nodes ({d.nodes}) must split evenly over sites ({d.sites})", rule="sites_divide_nodes")
        data["sites"] = [{"name": f"site{i + 1}", "nodes": d.nodes // d.sites} for i in range(d.sites)]
        data["interconnect"] = dict(interconnect) | {"links": d.dci_links}
    return data


def fitting_design(d: Design, prices: PriceBook, shared: Mapping[str, Any] | None = None
                   ) -> tuple[dict[str, Any], Cluster]:
    """The cluster file of ``d`` on the fewest tiers whose fabric fits the switches (module docstring), with the
    ``shared`` sections, and its cluster; raises when none does."""
    server = prices.server(d.gpu)
    if (d.nodes * server.gpus) % server.scale_up.domain_gpus:
        raise SpecError(f"nodes ({d.nodes}) x {server.gpus} GPUs must fill whole scale-up domains of "
                        f"{server.scale_up.domain_gpus}", rule="fills_scale_up")
    for tiers in (2, 3):
        data = design_mapping(d, prices, tiers, shared)
        cluster = cluster_from_mapping(data, "design")
        try:
            if not bill_of_materials(cluster, server.nodes_per_rack).notes:
                return data, cluster
        except SpecError:
            if tiers == 3:
                raise  # 2 tiers may be refused outright (more leaves than the radix: topology/shape.py)
    raise FabricMisfit(f"{d.label()}: no 3-tier fabric of {_radix(d, prices)}-port switches holds "
                       f"{d.nodes * d.nics_per_node} NICs")


def build_design(d: Design, prices: PriceBook, shared: Mapping[str, Any] | None = None) -> Cluster:
    """The cluster of :func:`fitting_design`."""
    return fitting_design(d, prices, shared)[1]


REFERENCE_GPUS = (1024, 8192, 32768)
REFERENCE_FABRICS = {  # name -> (transport, topology, oversubscription at the leaf)
    "IB NDR fat tree 1:1": ("infiniband", "fat-tree", 1.0),
    "RoCE 400G rail-optimized 1:1": ("roce", "rail-optimized", 1.0),
    "RoCE 400G rail-optimized 2:1": ("roce", "rail-optimized", 2.0),
}


def network_share_table(prices: PriceBook, gpu: str = "h100-sxm") -> list[tuple[str, int, ClusterCost]]:
    """(fabric, GPUs, cost) for every reference fabric at 1k, 8k and 32k GPUs (8 x 400G NICs per node)."""
    rows = []
    per_node = prices.server(gpu).gpus
    for name, (transport, topology, ratio) in REFERENCE_FABRICS.items():
        for gpus in REFERENCE_GPUS:
            d = Design(gpu, gpus // per_node, per_node, 400.0, transport, topology, ratio)
            rows.append((name, gpus, cluster_cost(build_design(d, prices), prices)))
    return rows
