"""The price and power book: what each part of a cluster costs and draws, every entry with its source.

The bundled book is ``cost/data/prices.yaml``; a user's quotes (``--prices FILE``, same keys) replace
entries of the same identity: a server by GPU name, a switch by (transport family, speed, radix), a NIC by
speed, a medium by name, and facility keys one by one. Validated with pydantic (``extra="forbid"``), then
frozen into a :class:`PriceBook` the models take.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from slowlink.errors import PriceMissing, SpecError
from slowlink.fileio import format_validation_error, parse_text, read_mapping

_STRICT = ConfigDict(extra="forbid", allow_inf_nan=False)
Medium = Literal["dac", "mmf", "smf"]


class Sourced(BaseModel):
    model_config = _STRICT
    source: str = Field(min_length=1, description="Where the number comes from (document, page, date).")
    date: str | None = Field(None, description="When the price was seen, YYYY-MM.")
    estimate: bool = Field(False, description="True when not a published price: the source says whose estimate.")


class ScaleUpEntry(BaseModel):
    model_config = _STRICT
    link: str = Field(description="Catalog scale-up link of the server (nvlink4, nvlink5...).")
    domain_gpus: int = Field(ge=1, description="GPUs in one scale-up domain.")


class ServerEntry(Sourced):
    gpus: int = Field(ge=1, description="GPUs per server (or NVL72 compute tray).")
    price_usd: float = Field(gt=0, description="One server without its compute NICs, USD.")
    power_w: float = Field(gt=0, description="Full-load power of one server, W.")
    nodes_per_rack: int = Field(ge=1, description="Servers per rack.")
    scale_up: ScaleUpEntry = Field(description="The server's scale-up domain.")


class SwitchEntry(Sourced):
    name: str = Field(description="Model of the switch.")
    transport: Literal["infiniband", "ethernet"] = Field(description="Family: RoCE runs on ethernet switches.")
    speed_gbit_s: float = Field(gt=0, description="Port speed, Gbit/s.")
    radix: int = Field(ge=2, description="Ports at that speed.")
    price_usd: float = Field(gt=0, description="One switch, USD.")
    power_w: float = Field(gt=0, description="Power without optics, W.")


class NicEntry(Sourced):
    speed_gbit_s: float = Field(gt=0, description="Line rate, Gbit/s.")
    price_usd: float = Field(gt=0, description="One NIC, USD (its power is in the server's).")


class MediumEntry(Sourced):
    price_usd: float = Field(ge=0, description="Per link end (optics) or per cable (dac), USD.")
    fiber_usd: float = Field(0.0, ge=0, description="Fiber per optical link, USD.")
    power_w: float = Field(ge=0, description="Per link end, W.")
    reach_m: float = Field(gt=0, description="Longest link, m.")


class FacilityEntry(Sourced):
    pue: float = Field(ge=1, description="Power usage effectiveness: facility power / IT power.")
    usd_per_kwh: float = Field(ge=0, description="Electricity price, USD per kWh.")
    depreciation_years: float = Field(gt=0, description="Straight-line life of the hardware, years.")
    network_spares_fraction: float = Field(ge=0, le=1, description="Spare switches, optics, cables on site.")


class PricesSpec(BaseModel):
    model_config = _STRICT
    servers: dict[str, ServerEntry] = Field(default_factory=dict, description="By catalog GPU name.")
    switches: list[SwitchEntry] = Field(default_factory=list, description="Fixed switches.")
    nics: list[NicEntry] = Field(default_factory=list, description="NICs by speed.")
    media: dict[Medium, MediumEntry] = Field(default_factory=dict, description="dac, mmf, smf.")
    facility: FacilityEntry | None = Field(None, description="PUE, electricity, depreciation, spares.")


@dataclass(frozen=True)
class PriceBook:
    """Every price the cost model needs, looked up by what the topology asks for."""

    servers: dict[str, ServerEntry]
    switches: tuple[SwitchEntry, ...]
    nics: tuple[NicEntry, ...]
    media: dict[str, MediumEntry]
    facility: FacilityEntry

    def server(self, gpu: str) -> ServerEntry:
        if gpu not in self.servers:
            raise PriceMissing(f"prices: servers.{gpu}: no price for a server of this GPU (priced: "
                            f"{', '.join(sorted(self.servers))}); add one with --prices")
        return self.servers[gpu]

    def switch(self, family: str, speed_gbit_s: float, radix: int) -> SwitchEntry:
        for s in self.switches:
            if s.transport == family and s.speed_gbit_s == speed_gbit_s and s.radix == radix:
                return s
        have = ", ".join(f"{s.transport} {s.speed_gbit_s:g}G x{s.radix}" for s in self.switches)
        raise PriceMissing(f"prices: switches: no {family} switch of {radix} ports at {speed_gbit_s:g} Gbit/s "
                        f"(priced: {have}); add one with --prices or change fabric.switch_radix")

    def nic(self, speed_gbit_s: float) -> NicEntry:
        for n in self.nics:
            if n.speed_gbit_s == speed_gbit_s:
                return n
        raise PriceMissing(f"prices: nics: no NIC priced at {speed_gbit_s:g} Gbit/s (priced: "
                        f"{', '.join(f'{n.speed_gbit_s:g}' for n in self.nics)}); add one with --prices")

    def medium(self, name: str) -> MediumEntry:
        if name not in self.media:
            raise PriceMissing(f"prices: media.{name}: not priced; add it with --prices")
        return self.media[name]


def _validate(data: dict[str, Any], source: str) -> PricesSpec:
    try:
        return PricesSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc, source, "prices")) from None


def _merge(base: PricesSpec, over: PricesSpec) -> PricesSpec:
    """``base`` with every entry of ``over`` replacing the one of the same identity (module docstring)."""
    switches = {(s.transport, s.speed_gbit_s, s.radix): s for s in base.switches}
    switches |= {(s.transport, s.speed_gbit_s, s.radix): s for s in over.switches}
    nics = {n.speed_gbit_s: n for n in base.nics} | {n.speed_gbit_s: n for n in over.nics}
    return PricesSpec(servers=base.servers | over.servers, switches=list(switches.values()),
                      nics=list(nics.values()), media=base.media | over.media,
                      facility=over.facility or base.facility)


_BUNDLED: PricesSpec | None = None


def bundled_prices() -> PricesSpec:
    """The bundled book, parsed once per process."""
    global _BUNDLED
    if _BUNDLED is None:
        text = resources.files("slowlink.cost.data").joinpath("prices.yaml").read_text("utf-8")
        _BUNDLED = _validate(parse_text(text, "prices.yaml", False), "prices.yaml")
    return _BUNDLED


def load_prices(path: Path | str | None = None) -> PriceBook:
    """The bundled book, with the entries of the user's file ``path`` (if given) replacing its own."""
    spec = bundled_prices()
    if path is not None:
        spec = _merge(spec, _validate(read_mapping(path), str(path)))
    if spec.facility is None:  # the bundled file always has one; kept for the type checker
        raise SpecError("prices: facility: required section is missing")
    media: dict[str, MediumEntry] = {str(k): v for k, v in spec.media.items()}
    return PriceBook(dict(spec.servers), tuple(spec.switches), tuple(spec.nics), media, spec.facility)
