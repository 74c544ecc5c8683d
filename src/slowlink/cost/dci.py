"""The long haul between sites in the bill: coherent optics at both ends of each link (capex and power) and the
lease of the capacity between them (opex).

  links        = sites x interconnect.links / 2            (each link joins two sites; ``links`` counts one
                                                           site's egress)
  transceivers = 2 x links                                 (one coherent pluggable per link end)
  lease        = links x speed_gbit_s x USD per Gbit/s-month,  per hour: / (8,766 / 12 h)
  route        = RTT / 2 x c / 1.4682                      (spec/sites.py: the fibre the round trip implies)

A route longer than the optics' reach needs amplifiers or regenerators, which are the leased line system's: a
note says so. Not counted: the routers or switch ports the links plug into (a few ports of the site's fabric).
"""

from __future__ import annotations

from dataclasses import dataclass

from slowlink import units
from slowlink.errors import PriceMissing
from slowlink.spec.prices import DciOptics, PriceBook
from slowlink.spec.sites import Sites

HOURS_PER_MONTH = units.YEAR / 12 / units.HOUR  # a mean month of the Julian year: 730.5 h


@dataclass(frozen=True)
class DciBill:
    """What the long haul adds to a cluster's bill (module docstring); ``optics`` None: the lease includes them."""

    sites: int
    links: float
    speed_gbit_s: float
    optics: str | None
    optics_usd: float           # capex of every transceiver
    optics_power_w: float       # IT power of every transceiver
    lease_usd_per_month: float
    route_km: float
    notes: tuple[str, ...] = ()

    @property
    def transceivers(self) -> int:
        return 0 if self.optics is None else round(2 * self.links)

    @property
    def capacity_gbit_s(self) -> float:
        """Leased capacity, each direction, Gbit/s."""
        return self.links * self.speed_gbit_s

    @property
    def lease_usd_per_hour(self) -> float:
        return self.lease_usd_per_month / HOURS_PER_MONTH

    def to_json(self) -> dict[str, object]:
        return {"sites": self.sites, "links": self.links, "speed_gbit_s": self.speed_gbit_s,
                "capacity_gbit_s": self.capacity_gbit_s, "optics": self.optics, "transceivers": self.transceivers,
                "optics_usd": self.optics_usd, "optics_power_w": self.optics_power_w,
                "lease_usd_per_month": self.lease_usd_per_month, "lease_usd_per_hour": self.lease_usd_per_hour,
                "route_km": self.route_km, "notes": list(self.notes)}


def dci_lease_usd_per_month(capacity_gbit_s: float, usd_per_gbit_s_month: float) -> float:
    """Monthly lease of ``capacity_gbit_s`` at a quote in USD per Gbit/s and month."""
    return capacity_gbit_s * usd_per_gbit_s_month


def dci_bill(sites: Sites, prices: PriceBook) -> DciBill:
    """The long haul's optics and lease (module docstring); raises :class:`~slowlink.errors.PriceMissing` where
    the lease has no quote or the optics no price."""
    ic = sites.interconnect
    n = len(sites.sites)
    links = n * ic.links / 2.0
    speed = ic.link_bytes_s / units.Gbit
    if ic.price_usd_per_gbit_s_month is None:
        raise PriceMissing("interconnect.price_usd_per_gbit_s_month (None): the long haul between the sites is "
                           "leased capacity: give its quote in USD per Gbit/s and month")
    lease = dci_lease_usd_per_month(links * speed, ic.price_usd_per_gbit_s_month)
    optics: DciOptics | None = None if ic.optics is None else prices.dci(ic.optics)
    notes = []
    if optics is None:
        notes.append("interconnect.optics not named: the lease is taken to include the optics (a managed wavelength)")
    elif ic.route_km > optics.reach_km:
        notes.append(f"the {ic.rtt_s / units.MS:g} ms round trip implies up to {ic.route_km:,.0f} km of fibre, "
                     f"past {ic.optics}'s {optics.reach_km:g} km reach: amplifiers or regenerators on the route are "
                     "the leased line system's")
    count = 2 * links
    return DciBill(n, links, speed, ic.optics, 0.0 if optics is None else count * optics.price_usd,
                   0.0 if optics is None else count * optics.power_w, lease, ic.route_km, tuple(notes))
