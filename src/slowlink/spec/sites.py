"""Sites and the interconnect between them: a cluster split over data centres joined by long-haul links (DCI).

``sites:`` names each site and its nodes (they sum to the cluster's); ``interconnect:`` says what joins them: each
site's links to the others, their rate, the round trip, the packet loss and the transport. Both are optional and
come together; without them a cluster is one site. Resolved once, at load, into SI units (:class:`Sites`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from slowlink import units
from slowlink.fileio import SPEC_CONFIG
from slowlink.spec.bounds import DciLinks, LinkGbitS, RttMs, SegmentBytes, WindowMib

DciTransport = Literal["tcp", "rdma"]

# Linux's default ceiling on a TCP socket's receive buffer, and so its window: net.ipv4.tcp_rmem max, 6 MiB
# (6291456 bytes; Documentation/networking/ip-sysctl.rst, tcp_rmem).
LINUX_TCP_WINDOW_BYTES = 6291456.0
# A TCP segment's payload on a 1,500-byte MTU: 1500 - 20 (IPv4) - 20 (TCP) - 12 (timestamps option) = 1448 B.
TCP_MSS_BYTES = 1448
# RoCE's largest path MTU, the payload of one RDMA packet (InfiniBand Architecture Specification, 4,096 B).
RDMA_MTU_BYTES = 4096
# Light in single-mode fibre: c / group index, 1.4682 at 1550 nm (Corning SMF-28 Ultra datasheet), km per second.
FIBRE_KM_S = 299792.458 / 1.4682


MAX_STREAMS = 64  # NCCL's most sockets per connection (NCCL_NSOCKS_PERTHREAD x NCCL_SOCKET_NTHREADS <= 64)

class SiteSpec(BaseModel):
    model_config = SPEC_CONFIG
    name: str = Field(min_length=1, description="Name of the site (data centre), shown in reports.")
    nodes: int = Field(ge=1, description="Nodes of the cluster in this site; the sites' nodes sum to `nodes`.")
    mtbf_hours: float | None = Field(None, gt=0, description="Mean hours between outages of the whole site (power, "
                                     "cooling, its border network); with repair_hours. None: not priced.")
    repair_hours: float | None = Field(None, ge=0, description="Mean hours a site outage lasts; with mtbf_hours.")


class InterconnectSpec(BaseModel):
    model_config = SPEC_CONFIG
    links: DciLinks = Field(ge=1, description="Long-haul links leaving each site towards the others (its DCI "
                            "egress), full duplex.")
    speed_gbit_s: LinkGbitS = Field(gt=0, description="Line rate of each link, Gbit/s.")
    rtt_ms: RttMs = Field(ge=0, description="Round-trip time between sites, milliseconds (fibre: ~1 ms per 100 km).")
    loss: float = Field(0.0, ge=0, description="Packet loss probability on the long haul, in [0, 1).")
    transport: DciTransport = Field("tcp", description="tcp (NCCL's socket transport, gloo) or rdma (RoCE/IB "
                                    "extended over the long haul, e.g. MetroX).")
    window_mib: WindowMib | None = Field(
        None, gt=0, description="Window of one stream, MiB: TCP's receive buffer, an RDMA queue pair's outstanding "
        "bytes. Default: Linux's tcp_rmem ceiling (6 MiB) for tcp, none (the bandwidth-delay product) for rdma.")
    segment_bytes: SegmentBytes | None = Field(
        None, description="Payload of one segment (TCP MSS) or packet (RDMA MTU), bytes. Default 1448 for tcp, "
        "4096 for rdma.")
    streams_per_connection: int = Field(
        1, ge=1, le=MAX_STREAMS, description="Parallel streams each cross-site connection opens "
        f"(NCCL_NSOCKS_PERTHREAD x NCCL_SOCKET_NTHREADS, at most {MAX_STREAMS}).")
    price_usd_per_gbit_s_month: float | None = Field(
        None, ge=0, description="Lease price of the long haul's capacity (the line system between the sites' "
        "optics), USD per Gbit/s and month; required to price a cluster with sites.")
    link_mtbf_hours: float | None = Field(None, gt=0, description="Mean hours between failures of one long-haul "
                                          "link (a fibre cut, an optic); with link_repair_hours. None: not priced.")
    link_repair_hours: float | None = Field(None, ge=0, description="Mean hours to repair one long-haul link; with "
                                            "link_mtbf_hours.")
    optics: str | None = Field(None, description="Coherent optics at each link end, by the price book's dci_optics "
                               "name (400ZR, 400ZR+); none: the lease includes them (a managed wavelength).")

    @field_validator("loss")
    @classmethod
    def _loss_below_one(cls, v: float) -> float:
        if not v < 1.0:
            raise ValueError("must be in [0, 1): a packet loss probability of 1 delivers nothing")
        return v


def check_sites(sites: Sequence[SiteSpec] | None, interconnect: InterconnectSpec | None, nodes: int) -> None:
    """The rules across keys: sites and interconnect come together, there are at least two sites, their names are
    unique and their nodes sum to the cluster's."""
    if sites is None and interconnect is None:
        return
    if sites is None:
        raise ValueError("interconnect: given without sites: name the sites it joins (sites: [{name, nodes}, ...])")
    if interconnect is None:
        raise ValueError(f"sites ({len(sites)}): given without interconnect: say what joins them "
                         "(interconnect: {links, speed_gbit_s, rtt_ms})")
    if len(sites) < 2:
        raise ValueError(f"sites ({len(sites)}): must name at least 2 sites (one site is the cluster without sites:)")
    names = [s.name for s in sites]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"sites: name {twice[0]!r} given more than once: each site needs its own name")
    _together("interconnect.link_mtbf_hours", interconnect.link_mtbf_hours, interconnect.link_repair_hours,
              "interconnect.link_repair_hours")
    for s in sites:
        _together(f"sites.{s.name}.mtbf_hours", s.mtbf_hours, s.repair_hours, f"sites.{s.name}.repair_hours")
    total = sum(s.nodes for s in sites)
    if total != nodes:
        shown = " + ".join(str(s.nodes) for s in sites)
        raise ValueError(f"sites: nodes {shown} = {total} != nodes ({nodes}): every node is in one site")


def _together(name: str, value: float | None, other: float | None, other_name: str) -> None:
    if (value is None) != (other is None):
        given, missing = (name, other_name) if value is not None else (other_name, name)
        raise ValueError(f"{given} given without {missing}: an outage is priced from its rate and its length, "
                         "give both")


@dataclass(frozen=True)
class Site:
    name: str
    nodes: int
    mtbf_s: float | None = None    # mean time between whole-site outages (None: not priced)
    repair_s: float | None = None  # their mean length


@dataclass(frozen=True)
class Interconnect:
    """The long haul in SI units (fields as :class:`InterconnectSpec` documents them)."""

    links: int
    link_bytes_s: float
    rtt_s: float
    loss: float
    transport: DciTransport
    window_bytes: float | None  # None: no window limit (the bandwidth-delay product)
    segment_bytes: float
    streams_per_connection: int
    price_usd_per_gbit_s_month: float | None = None
    optics: str | None = None
    link_mtbf_s: float | None = None    # mean time between one link's failures (None: not priced)
    link_repair_s: float | None = None  # mean time to repair it

    @property
    def egress_bytes_s(self) -> float:
        """Line rate of one site's links towards the others, each direction, bytes/s."""
        return self.links * self.link_bytes_s

    @property
    def route_km(self) -> float:
        """Fibre route the round trip implies, km: RTT / 2 x the speed of light in fibre (queueing and equipment
        delay counted as distance, so an upper bound)."""
        return self.rtt_s / 2.0 * FIBRE_KM_S

    @property
    def bdp_bytes(self) -> float:
        """Bandwidth-delay product of a site's egress: the bytes in flight that keep it full."""
        return self.egress_bytes_s * self.rtt_s


@dataclass(frozen=True)
class Sites:
    """A cluster's sites, in order (block placement fills them in turn), and what joins them."""

    sites: tuple[Site, ...]
    interconnect: Interconnect

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.sites)

    def on_nodes(self, nodes: int) -> Sites | None:
        """These sites holding ``nodes`` nodes in the shares they hold now (largest remainder, ties to the first
        site), as ``slowlink scale`` grows a cluster; None (one site) when a site would hold none."""
        total = sum(s.nodes for s in self.sites)
        if nodes == total:
            return self
        exact = [s.nodes * nodes / total for s in self.sites]
        counts = [int(x) for x in exact]
        order = sorted(range(len(exact)), key=lambda i: (-(exact[i] - counts[i]), i))
        for i in order[: nodes - sum(counts)]:
            counts[i] += 1
        if min(counts) == 0:
            return None
        return Sites(tuple(replace(s, nodes=n) for s, n in zip(self.sites, counts, strict=True)), self.interconnect)


def resolve_sites(sites: Sequence[SiteSpec] | None, interconnect: InterconnectSpec | None) -> Sites | None:
    """The resolved sites, or None for a one-site cluster (validated already: :func:`check_sites`)."""
    if sites is None or interconnect is None:
        return None
    i = interconnect
    tcp = i.transport == "tcp"
    window = (i.window_mib * units.MiB if i.window_mib is not None
              else LINUX_TCP_WINDOW_BYTES if tcp else None)
    segment = i.segment_bytes if i.segment_bytes is not None else TCP_MSS_BYTES if tcp else RDMA_MTU_BYTES
    return Sites(tuple(Site(s.name, s.nodes, _hours(s.mtbf_hours), _hours(s.repair_hours)) for s in sites),
                 Interconnect(i.links, i.speed_gbit_s * units.Gbit, i.rtt_ms * units.MS, i.loss, i.transport,
                              window, float(segment), i.streams_per_connection, i.price_usd_per_gbit_s_month,
                              i.optics, _hours(i.link_mtbf_hours), _hours(i.link_repair_hours)))


def _hours(h: float | None) -> float | None:
    return None if h is None else h * units.HOUR
