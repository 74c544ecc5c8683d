"""The price and power book's schema: what each part of a cluster costs and draws, every entry with its source.

A book is a YAML file (the bundled ``cost/data/prices.yaml``, or a user's quotes given with ``--prices``, same
keys), validated with pydantic (the ``*Spec`` models, ``extra="forbid"``), merged (a user's entry replaces the
bundled one of the same identity: a server by GPU name, a switch by (transport family, speed, radix), a NIC by
speed, a medium or DCI optics by name, the facility section as a whole), then resolved once into the frozen
:class:`PriceBook` of dataclasses that the cost model reads (:func:`price_book`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from slowlink.errors import PriceMissing, SpecError
from slowlink.fileio import validated

_STRICT = ConfigDict(extra="forbid", allow_inf_nan=False)
MediumName = Literal["dac", "mmf", "smf"]


class SourcedSpec(BaseModel):
    model_config = _STRICT
    source: str = Field(min_length=1, description="Where the number comes from (document, page, date).")
    date: str | None = Field(None, description="When the price was seen, YYYY-MM.")
    estimate: bool = Field(False, description="True when not a published price: the source says whose estimate.")


class ScaleUpEntrySpec(BaseModel):
    model_config = _STRICT
    link: str = Field(description="Catalog scale-up link of the server (nvlink4, nvlink5...).")
    domain_gpus: int = Field(ge=1, description="GPUs in one scale-up domain.")


class ServerSpec(SourcedSpec):
    gpus: int = Field(ge=1, description="GPUs per server (or NVL72 compute tray).")
    price_usd: float = Field(gt=0, description="One server without its compute NICs, USD.")
    power_w: float = Field(gt=0, description="Full-load power of one server, W.")
    nodes_per_rack: int = Field(ge=1, description="Servers per rack.")
    scale_up: ScaleUpEntrySpec = Field(description="The server's scale-up domain.")


class SwitchSpec(SourcedSpec):
    name: str = Field(description="Model of the switch.")
    transport: Literal["infiniband", "ethernet"] = Field(description="Family: RoCE runs on ethernet switches.")
    speed_gbit_s: float = Field(gt=0, description="Port speed, Gbit/s.")
    radix: int = Field(ge=2, description="Ports at that speed.")
    price_usd: float = Field(gt=0, description="One switch, USD.")
    power_w: float = Field(gt=0, description="Power without optics, W.")


class NicSpec(SourcedSpec):
    speed_gbit_s: float = Field(gt=0, description="Line rate, Gbit/s.")
    price_usd: float = Field(gt=0, description="One NIC, USD (its power is in the server's).")


class MediumSpec(SourcedSpec):
    price_usd: float = Field(ge=0, description="Per link end (optics) or per cable (dac), USD.")
    fiber_usd: float = Field(0.0, ge=0, description="Fiber per optical link, USD.")
    power_w: float = Field(ge=0, description="Per link end, W.")
    reach_m: float = Field(gt=0, description="Longest link, m.")


class DciOpticsSpec(SourcedSpec):
    price_usd: float = Field(ge=0, description="One coherent pluggable (one link end), USD.")
    power_w: float = Field(ge=0, description="One module, W.")
    reach_km: float = Field(gt=0, description="Longest span it is specified for without regeneration, km.")


class FacilitySpec(SourcedSpec):
    pue: float = Field(ge=1, description="Power usage effectiveness: facility power / IT power.")
    usd_per_kwh: float = Field(ge=0, description="Electricity price, USD per kWh.")
    depreciation_years: float = Field(gt=0, description="Straight-line life of the hardware, years.")
    network_spares_fraction: float = Field(ge=0, le=1, description="Spare switches, optics, cables on site.")


class PricesSpec(BaseModel):
    model_config = _STRICT
    servers: dict[str, ServerSpec] = Field(default_factory=dict, description="By catalog GPU name.")
    switches: list[SwitchSpec] = Field(default_factory=list, description="Fixed switches.")
    nics: list[NicSpec] = Field(default_factory=list, description="NICs by speed.")
    media: dict[MediumName, MediumSpec] = Field(default_factory=dict, description="dac, mmf, smf.")
    dci_optics: dict[str, DciOpticsSpec] = Field(default_factory=dict, description="Coherent optics of the long "
                                                 "haul between sites, by the name interconnect.optics gives.")
    facility: FacilitySpec | None = Field(None, description="PUE, electricity, depreciation, spares.")


@dataclass(frozen=True, kw_only=True)
class Sourced:
    """Where a resolved entry's figures come from (as :class:`SourcedSpec`): keyword-only, so each entry's own
    fields stay positional before them."""

    source: str
    date: str | None = None
    estimate: bool = False


@dataclass(frozen=True)
class ServerScaleUp:
    link: str  # catalog scale-up link of the server (nvlink4, nvlink5...)
    domain_gpus: int


@dataclass(frozen=True)
class Server(Sourced):
    """One server (or NVL72 compute tray) without its compute NICs (fields as :class:`ServerSpec`)."""

    gpus: int
    price_usd: float
    power_w: float
    nodes_per_rack: int
    scale_up: ServerScaleUp


@dataclass(frozen=True)
class Switch(Sourced):
    """A fixed switch (fields as :class:`SwitchSpec`)."""

    name: str
    transport: Literal["infiniband", "ethernet"]
    speed_gbit_s: float
    radix: int
    price_usd: float
    power_w: float


@dataclass(frozen=True)
class Nic(Sourced):
    """A NIC by line rate (fields as :class:`NicSpec`)."""

    speed_gbit_s: float
    price_usd: float


@dataclass(frozen=True)
class Medium(Sourced):
    """A link medium: DAC, multi-mode or single-mode optics (fields as :class:`MediumSpec`)."""

    price_usd: float
    fiber_usd: float
    power_w: float
    reach_m: float


@dataclass(frozen=True)
class DciOptics(Sourced):
    """A coherent pluggable of the long haul (fields as :class:`DciOpticsSpec`)."""

    price_usd: float
    power_w: float
    reach_km: float


@dataclass(frozen=True)
class Facility(Sourced):
    """PUE, electricity, depreciation and spares (fields as :class:`FacilitySpec`)."""

    pue: float
    usd_per_kwh: float
    depreciation_years: float
    network_spares_fraction: float


@dataclass(frozen=True)
class PriceBook:
    """Every price the cost model needs, looked up by what the topology asks for."""

    servers: dict[str, Server]
    switches: tuple[Switch, ...]
    nics: tuple[Nic, ...]
    media: dict[str, Medium]
    facility: Facility
    dci_optics: dict[str, DciOptics] = field(default_factory=dict)

    def server(self, gpu: str) -> Server:
        if gpu not in self.servers:
            raise PriceMissing(f"prices: servers.{gpu}: no price for a server of this GPU (priced: "
                            f"{', '.join(sorted(self.servers))}); add one with --prices")
        return self.servers[gpu]

    def switch(self, family: str, speed_gbit_s: float, radix: int) -> Switch:
        for s in self.switches:
            if s.transport == family and s.speed_gbit_s == speed_gbit_s and s.radix == radix:
                return s
        have = ", ".join(f"{s.transport} {s.speed_gbit_s:g}G x{s.radix}" for s in self.switches)
        raise PriceMissing(f"prices: switches: no {family} switch of {radix} ports at {speed_gbit_s:g} Gbit/s "
                        f"(priced: {have}); add one with --prices or change fabric.switch_radix")

    def nic(self, speed_gbit_s: float) -> Nic:
        for n in self.nics:
            if n.speed_gbit_s == speed_gbit_s:
                return n
        raise PriceMissing(f"prices: nics: no NIC priced at {speed_gbit_s:g} Gbit/s (priced: "
                        f"{', '.join(f'{n.speed_gbit_s:g}' for n in self.nics)}); add one with --prices")

    def dci(self, optics: str) -> DciOptics:
        if optics not in self.dci_optics:
            raise PriceMissing(f"prices: dci_optics.{optics}: no price for the interconnect's optics (priced: "
                               f"{', '.join(sorted(self.dci_optics))}); add one with --prices")
        return self.dci_optics[optics]

    def medium(self, name: str) -> Medium:
        if name not in self.media:
            raise PriceMissing(f"prices: media.{name}: not priced; add it with --prices")
        return self.media[name]


def validate_prices(data: dict[str, Any], source: str) -> PricesSpec:
    return validated(PricesSpec, data, source, "prices")


def _merge(base: PricesSpec, over: PricesSpec) -> PricesSpec:
    """``base`` with every entry of ``over`` replacing the one of the same identity (module docstring)."""
    switches = {(s.transport, s.speed_gbit_s, s.radix): s for s in base.switches}
    switches |= {(s.transport, s.speed_gbit_s, s.radix): s for s in over.switches}
    nics = {n.speed_gbit_s: n for n in base.nics} | {n.speed_gbit_s: n for n in over.nics}
    return PricesSpec(servers=base.servers | over.servers, switches=list(switches.values()),
                      nics=list(nics.values()), media=base.media | over.media,
                      dci_optics=base.dci_optics | over.dci_optics, facility=over.facility or base.facility)


def _sourced(e: SourcedSpec) -> dict[str, Any]:
    return {"source": e.source, "date": e.date, "estimate": e.estimate}


def resolve_prices(spec: PricesSpec) -> PriceBook:
    """The book the cost model reads, from a validated (and merged) one."""
    if spec.facility is None:  # the bundled file always has one; kept for the type checker
        raise SpecError("prices: facility: required section is missing")
    f = spec.facility
    return PriceBook(
        {gpu: Server(s.gpus, s.price_usd, s.power_w, s.nodes_per_rack,
                     ServerScaleUp(s.scale_up.link, s.scale_up.domain_gpus), **_sourced(s))
         for gpu, s in spec.servers.items()},
        tuple(Switch(w.name, w.transport, w.speed_gbit_s, w.radix, w.price_usd, w.power_w, **_sourced(w))
              for w in spec.switches),
        tuple(Nic(n.speed_gbit_s, n.price_usd, **_sourced(n)) for n in spec.nics),
        {str(k): Medium(m.price_usd, m.fiber_usd, m.power_w, m.reach_m, **_sourced(m)) for k, m in spec.media.items()},
        Facility(f.pue, f.usd_per_kwh, f.depreciation_years, f.network_spares_fraction, **_sourced(f)),
        {k: DciOptics(o.price_usd, o.power_w, o.reach_km, **_sourced(o)) for k, o in spec.dci_optics.items()})


def price_book(bundled: PricesSpec, quotes: dict[str, Any] | None = None, source: str = "prices") -> PriceBook:
    """``bundled`` with the entries of a user's ``quotes`` (a parsed file named ``source``) replacing its own."""
    return resolve_prices(bundled if quotes is None else _merge(bundled, validate_prices(quotes, source)))
