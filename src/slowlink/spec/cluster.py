"""The cluster spec: what a user writes about their machines, validated, then resolved into SI units.

The YAML key names are a contract (docs/spec.md documents every one): keys may be added, never renamed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from slowlink import units
from slowlink.catalog import Catalog, Gpu, ScaleUpLink, Transport, load_catalog
from slowlink.errors import SpecError
from slowlink.fileio import SPEC_CONFIG, check_kind, read_mapping, source_name, validated
from slowlink.spec.bounds import (
    GpusPerNode,
    LinkGbitS,
    NicsPerNode,
    Nodes,
    ScaleUpGbyteS,
    SwitchLatencyUs,
    SwitchRadix,
)
from slowlink.spec.degraded import (
    Degraded,
    DegradedPart,
    DegradedPartSpec,
    Variability,
    VariabilitySpec,
    check_degraded,
    resolve_degraded,
)
from slowlink.spec.reliability import Reliability, ReliabilitySpec
from slowlink.spec.sites import InterconnectSpec, Sites, SiteSpec, check_sites, resolve_sites
from slowlink.spec.storage import StorageDetails, StorageSpec, storage_details


class ScaleUpSpec(BaseModel):
    model_config = SPEC_CONFIG
    link: str = Field(description="Catalog name of the scale-up link: nvlink3, nvlink4, nvlink5, pcie-gen5, xgmi.")
    domain_gpus: int = Field(8, ge=1, description="GPUs in one scale-up domain: 8 for HGX, 72 for NVL72.")
    bandwidth_gbyte_s: ScaleUpGbyteS | None = Field(
        None, gt=0, description="Override of the catalog's per-GPU, per-direction bandwidth, GB/s."
    )
    sharp: bool | None = Field(None, description="Override: the switch reduces in-network (NVLS).")


class NicSpec(BaseModel):
    model_config = SPEC_CONFIG
    per_node: NicsPerNode = Field(ge=0, description="NICs of this role in each node.")
    speed_gbit_s: LinkGbitS = Field(gt=0, description="Line rate of each NIC, Gbit/s.")


class NicsSpec(BaseModel):
    model_config = SPEC_CONFIG
    compute: NicSpec = Field(description="NICs carrying NCCL traffic (the 'rails').")
    storage: NicSpec | None = Field(None, description="NICs on a separate storage fabric; absent if none.")


class DragonflySpec(BaseModel):
    model_config = SPEC_CONFIG
    groups: int = Field(ge=2, description="Dragonfly groups.")
    global_links_per_switch: int = Field(1, ge=1, description="Global links leaving each group switch.")


TransportKind = Literal["infiniband", "roce", "ethernet"]


class FabricSpec(BaseModel):
    model_config = SPEC_CONFIG
    transport: TransportKind = Field(description="Scale-out transport.")
    lossless: bool = Field(True, description="RoCE with PFC + ECN tuned (true) or untuned (false).")
    topology: Literal["fat-tree", "rail-optimized", "dragonfly", "single-switch"] = Field(
        "fat-tree", description="Shape of the compute fabric."
    )
    tiers: int = Field(2, ge=1, le=3, description="Switch tiers of a fat tree (1 = one switch).")
    oversubscription: float | str | list[float | str] = Field(
        1, description="downlink:uplink; a number applies at the leaf, a list gives one ratio per tier "
        "from the leaf up (the last one is the pod boundary, e.g. Llama 3's [1, 1, 7])."
    )
    pod_gpus: int | None = Field(None, ge=1, description="GPUs under one full-bisection pod.")
    switch_radix: SwitchRadix = Field(64, ge=4, description="Ports per switch (e.g. 64 for Quantum-2 NDR).")
    switch_latency_us: SwitchLatencyUs = Field(0.6, ge=0, description="Per-switch forwarding latency, microseconds.")
    routing: Literal["ecmp", "dmodk", "adaptive"] | None = Field(
        None, description="How switches pick among equal-cost uplinks: ecmp (per-flow hash), dmodk "
        "(destination mod k, an InfiniBand subnet manager's static fat-tree routing) or adaptive (spraying). "
        "Default: dmodk on InfiniBand, ecmp on RoCE and Ethernet."
    )
    ecmp_seed: int = Field(0, description="Seed of the ECMP hash, for reproducible collisions.")
    dragonfly: DragonflySpec | None = Field(None, description="Dragonfly shape; required for dragonfly.")
    transport_profile: str | None = Field(
        None, description="Catalog transport to use instead of the one picked from transport and speed."
    )
    management_ports: int = Field(
        0, ge=0, description="Fabric-manager appliance ports (InfiniBand UFM) cabled to free leaf ports: "
        "counted by `slowlink bom`, carrying no training traffic."
    )

    @field_validator("oversubscription")
    @classmethod
    def _ratios_parse(cls, value: float | str | list[float | str]) -> float | str | list[float | str]:
        for item in value if isinstance(value, list) else [value]:
            units.parse_ratio(item)
        return value

    @model_validator(mode="after")
    def _shape(self) -> FabricSpec:
        if isinstance(self.oversubscription, list) and len(self.oversubscription) != self.tiers:
            raise ValueError(
                f"oversubscription has {len(self.oversubscription)} ratios but tiers is {self.tiers}: "
                "give one per tier, from the leaf up"
            )
        if self.topology == "dragonfly" and self.dragonfly is None:
            raise ValueError("topology dragonfly needs a dragonfly: {groups: N} section")
        _check_ratios_apply(self)
        return self


def _check_ratios_apply(f: FabricSpec) -> None:
    """Every oversubscription ratio above 1 must sit at an uplink stage the fabric has (topology/shape.py): a
    single switch has none, a 2-tier fat tree one (the leaf's; its spines are the top), a 3-tier one the leaf's
    and one at the pod boundary, where the ratios above the leaf collapse (their max). A ratio with no stage
    would change nothing, silently."""
    raw = f.oversubscription if isinstance(f.oversubscription, list) else [f.oversubscription]
    ratios = [units.parse_ratio(r) for r in raw]
    given = [f"{r:g}" if isinstance(r, float) else str(r) for r in raw]
    shown = f"oversubscription ({'[' + ', '.join(given) + ']' if isinstance(f.oversubscription, list) else given[0]})"
    if (f.topology == "single-switch" or f.tiers == 1) and max(ratios) > 1:
        raise ValueError(f"{shown}: a single switch has no uplinks, so an oversubscription changes nothing: "
                         "leave it out, or give tiers >= 2")
    if f.topology == "dragonfly" and max(ratios) > 1:
        raise ValueError(f"{shown}: the dragonfly model has no oversubscribed tier (its global links are sized by "
                         "dragonfly.global_links_per_switch): leave it out")
    if len(ratios) == 2 and f.tiers == 2 and ratios[1] > 1:
        raise ValueError(f"{shown}: a 2-tier fat tree has one uplink stage, the leaf's; its spines are the top tier "
                         f"and have no uplinks, so the second ratio ({given[1]}) changes nothing: give "
                         f"[{given[0]}, 1], or tiers: 3 for a pod boundary")
    if len(ratios) == 3 and ratios[1] > 1 and ratios[2] > 1 and ratios[1] != ratios[2]:
        raise ValueError(f"{shown}: above the leaf a 3-tier fat tree has one oversubscribed stage here, the pod "
                         f"boundary, where {given[1]} and {given[2]} would collapse into the larger: give it once, "
                         f"e.g. [{given[0]}, 1, {given[2]}]")


class PlacementSpec(BaseModel):
    model_config = SPEC_CONFIG
    mode: Literal["block", "fragmented", "custom"] = Field("block", description="How ranks map to nodes.")
    seed: int = Field(0, description="Seed for a fragmented placement.")
    node_order: list[int] | None = Field(None, description="custom: node index of each block of ranks.")


class ClusterSiteSpec(SiteSpec):
    fabric: FabricSpec | None = Field(None, description="The site's own scale-out fabric (its transport, shape, "
                                      "ratios); absent: the cluster's fabric: section.")


class ClusterSpec(BaseModel):
    """The cluster file, exactly as written."""

    model_config = SPEC_CONFIG
    name: str = Field(description="Name shown in reports.")
    nodes: Nodes = Field(ge=1, description="Nodes (servers) in the cluster.")
    gpus_per_node: GpusPerNode = Field(ge=1, description="GPUs in each node.")
    gpu: str = Field(description="Catalog name of the GPU.")
    scale_up: ScaleUpSpec = Field(description="The NVLink / NVSwitch (or PCIe, xGMI) domain.")
    nics: NicsSpec = Field(description="Compute and storage NICs per node.")
    fabric: FabricSpec = Field(description="The scale-out compute fabric.")
    storage: StorageSpec | None = Field(None, description="Shared storage; absent if not modelled.")
    placement: PlacementSpec = Field(default_factory=PlacementSpec, description="Rank placement.")
    catalog: list[str] = Field(default_factory=list, description="Extra catalog files, relative to this file.")
    calibration: str | None = Field(None, description="A calibrated profile from `slowlink calibrate`.")
    # The straggler model's keys (slowlink.spec.degraded, docs/straggler.md).
    degraded: list[DegradedPartSpec] = Field(default_factory=list, description="Parts slower than their "
                                             "datasheet: a NIC or link at a fraction of its rate, a slow GPU, "
                                             "a node with delayed messages.")
    variability: VariabilitySpec | None = Field(None, description="Per-rank compute / network time variation.")
    reliability: ReliabilitySpec | None = Field(
        None, description="Failure rates and recovery times (docs/goodput.md); absent: the defaults.")
    sites: list[ClusterSiteSpec] | None = Field(None, description="Data centres the nodes are split over, in "
                                                "order (docs/sites.md); absent: one site.")
    interconnect: InterconnectSpec | None = Field(None, description="The long-haul links joining the sites.")

    @model_validator(mode="after")
    def _domain(self) -> ClusterSpec:
        d, g = self.scale_up.domain_gpus, self.gpus_per_node
        if d % g and g % d:
            raise ValueError(
                f"scale_up.domain_gpus ({d}) must be a multiple or a divisor of gpus_per_node ({g})"
            )
        if d > g and (self.nodes * g) % d:
            raise ValueError(
                f"scale_up.domain_gpus ({d}) must divide the cluster's GPUs ({self.nodes} x {g})"
            )
        if self.nics.compute.per_node == 0 and self.nodes > 1:
            raise ValueError(f"nics.compute.per_node (0) must be >= 1 when nodes ({self.nodes}) > 1")
        order = self.placement.node_order
        if self.placement.mode == "custom" and (order is None or sorted(order) != list(range(self.nodes))):
            raise ValueError("placement.node_order must list every node index 0..nodes-1 once for mode custom")
        check_degraded(self.degraded, self.nodes, g, self.nics.compute.per_node)
        check_sites(self.sites, self.interconnect, self.nodes)
        return self


@dataclass(frozen=True)
class Placement:
    """How ranks map to nodes (fields as :class:`PlacementSpec` documents them)."""

    mode: Literal["block", "fragmented", "custom"] = "block"
    seed: int = 0
    node_order: tuple[int, ...] | None = None

    @classmethod
    def of(cls, spec: PlacementSpec) -> Placement:
        order = spec.node_order
        return cls(spec.mode, spec.seed, None if order is None else tuple(order))


@dataclass(frozen=True)
class ScaleUp:
    link: ScaleUpLink
    domain_gpus: int
    bw_bytes_s: float
    sharp: bool


@dataclass(frozen=True)
class NicGroup:
    per_node: int
    speed_bytes_s: float

    @property
    def node_bytes_s(self) -> float:
        """Line rate of all NICs of this role in one node, bytes/s."""
        return self.per_node * self.speed_bytes_s


@dataclass(frozen=True)
class Fabric:
    transport: Transport
    topology: str
    tiers: int
    oversubscription: tuple[float, ...]
    pod_gpus: int | None
    switch_radix: int
    switch_latency_s: float
    routing: str
    ecmp_seed: int
    dragonfly_groups: int | None
    dragonfly_global_links: int
    management_ports: int = 0  # fabric-manager appliance ports on free leaf ports (priced, no training traffic)
    routing_given: bool = False  # routing as written; else the transport's default (DEFAULT_ROUTING)


@dataclass(frozen=True)
class Storage:
    system: str
    shared_with_compute: bool
    read_bytes_s: float
    write_bytes_s: float
    metadata_ops_s: float
    targets: int
    details: StorageDetails | None = None  # tiers, per-client limits, retention (slowlink.spec.storage)


@dataclass(frozen=True)
class Cluster:
    """A cluster in SI units with its catalog entries resolved: what every model takes."""

    name: str
    nodes: int
    gpus_per_node: int
    gpu: Gpu
    scale_up: ScaleUp
    compute_nics: NicGroup
    storage_nics: NicGroup | None
    fabric: Fabric
    storage: Storage | None
    placement: Placement
    calibration: Path | None
    degraded: Degraded = field(default_factory=Degraded)  # ``degraded_parts`` keyed for the models
    degraded_parts: tuple[DegradedPart, ...] = ()  # each degraded part as written (priced one at a time)
    variability: Variability | None = None  # per-rank compute / network variation (the straggler model)
    reliability: Reliability | None = None  # failure rates and recovery overrides (None: the defaults)
    sites: Sites | None = None  # data centres and the long haul between them (None: one site)
    site_fabrics: tuple[tuple[str, Fabric], ...] = ()  # (site, its own fabric) where a site has one
    catalog: Catalog = field(default_factory=Catalog, compare=False, repr=False)  # what its names resolved against

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @functools.cached_property
    def key(self) -> str:
        """The cluster's value as a hashable key: every field it is compared by (the catalog its names were
        resolved against aside), so that equal clusters share cached work; computed once per object (~20 us)."""
        return repr(tuple(getattr(self, f.name) for f in fields(self) if f.compare))

    @property
    def nic_bw_bytes_s(self) -> float:
        """Line rate of one compute NIC, bytes/s."""
        return self.compute_nics.speed_bytes_s


def pick_transport(catalog: Catalog, spec: FabricSpec, speed_gbit_s: float) -> Transport:
    """The catalog transport for a fabric: the named profile, else the entry of that kind closest in speed.

    RoCE picks ``roce-lossless`` or ``roce-untuned`` by ``lossless``; InfiniBand and Ethernet the
    generation nearest ``speed_gbit_s`` (200 -> ib-hdr, 400 -> ib-ndr, 25 -> eth-25g).
    """
    if spec.transport_profile is not None:
        return catalog.transport(spec.transport_profile)
    candidates = [t for t in catalog.transports.values() if t.kind == spec.transport]
    if spec.transport == "roce":
        candidates = [t for t in candidates if t.lossless == spec.lossless] or candidates
    if not candidates:
        raise SpecError(f"fabric.transport ({spec.transport!r}) has no entry in the catalog")
    speed = speed_gbit_s * units.Gbit
    return min(candidates, key=lambda t: (abs(t.nominal_bytes_s - speed), t.name))


# An InfiniBand fabric is routed by its subnet manager: OpenSM's / UFM's fat-tree routing engines program
# destination-based (D-mod-K) forwarding tables (Zahavi et al. 2010; OpenSM "ftree" routing engine docs).
# Ethernet and RoCE switches hash each flow's 5-tuple onto one of the equal-cost uplinks (RFC 2992 ECMP);
# spreading across many queue pairs or packet spraying is a deployment's choice: `routing: adaptive`.
DEFAULT_ROUTING = {"infiniband": "dmodk", "roce": "ecmp", "ethernet": "ecmp"}


def _ratios(spec: FabricSpec) -> tuple[float, ...]:
    if isinstance(spec.oversubscription, list):
        return tuple(units.parse_ratio(r) for r in spec.oversubscription)
    return (units.parse_ratio(spec.oversubscription),) + (1.0,) * (spec.tiers - 1)


def cluster_from_mapping(data: dict[str, Any], source: str = "cluster", base_dir: Path | None = None) -> Cluster:
    """Validate a parsed cluster file and resolve it against the catalog."""
    check_kind(data, "cluster", source)
    spec = validated(ClusterSpec, data, source, "cluster")
    base = base_dir or Path.cwd()
    try:
        catalog = load_catalog([base / f for f in spec.catalog])
        gpu = catalog.gpu(spec.gpu)
        link = catalog.link(spec.scale_up.link)
        transport = pick_transport(catalog, spec.fabric, spec.nics.compute.speed_gbit_s)
    except SpecError as exc:  # a catalog file or lookup: say which cluster file asked for it
        raise exc.reworded(f"{source}: {exc}") from None
    scale_up = ScaleUp(
        link=link,
        domain_gpus=spec.scale_up.domain_gpus,
        bw_bytes_s=(spec.scale_up.bandwidth_gbyte_s * units.GB if spec.scale_up.bandwidth_gbyte_s
                    else link.bw_bytes_s),
        sharp=link.sharp if spec.scale_up.sharp is None else spec.scale_up.sharp,
    )
    fabric = resolve_fabric(spec.fabric, transport)
    try:
        site_fabrics = tuple((site.name, resolve_fabric(site.fabric, pick_transport(
            catalog, site.fabric, spec.nics.compute.speed_gbit_s))) for site in spec.sites or [] if site.fabric)
    except SpecError as exc:
        raise exc.reworded(f"{source}: sites: {exc}") from None
    storage = None
    if spec.storage is not None:
        s = spec.storage
        storage = Storage(s.system, s.shared_with_compute, s.read_gbyte_s * units.GB,
                          s.write_gbyte_s * units.GB, s.metadata_ops_s, s.targets, storage_details(s))
    nics = spec.nics
    parts = tuple(DegradedPart.of(p) for p in spec.degraded)
    calibration = base / spec.calibration if spec.calibration else None
    if calibration is not None and not calibration.is_file():
        raise SpecError(f"{source}: calibration ({spec.calibration!r}) does not exist next to the cluster "
                        "file: write it with `slowlink calibrate RESULT.json --cluster FILE`")
    return Cluster(
        name=spec.name,
        nodes=spec.nodes,
        gpus_per_node=spec.gpus_per_node,
        gpu=gpu,
        scale_up=scale_up,
        compute_nics=NicGroup(nics.compute.per_node, nics.compute.speed_gbit_s * units.Gbit),
        storage_nics=(NicGroup(nics.storage.per_node, nics.storage.speed_gbit_s * units.Gbit)
                      if nics.storage else None),
        fabric=fabric,
        storage=storage,
        placement=Placement.of(spec.placement),
        calibration=calibration,
        degraded=resolve_degraded(parts, spec.gpus_per_node),
        degraded_parts=parts,
        variability=None if spec.variability is None else Variability.of(spec.variability),
        reliability=None if spec.reliability is None else Reliability.of(spec.reliability),
        sites=resolve_sites(spec.sites, spec.interconnect),
        site_fabrics=site_fabrics,
        catalog=catalog,
    )


def resolve_fabric(f: FabricSpec, transport: Transport) -> Fabric:
    """A fabric: section in SI units on its catalog transport (the cluster's, or a site's own)."""
    return Fabric(
        transport=transport,
        topology=f.topology,
        tiers=1 if f.topology == "single-switch" else f.tiers,
        oversubscription=_ratios(f),
        pod_gpus=f.pod_gpus,
        switch_radix=f.switch_radix,
        switch_latency_s=f.switch_latency_us * units.US,
        routing=f.routing or DEFAULT_ROUTING[f.transport],
        ecmp_seed=f.ecmp_seed,
        dragonfly_groups=f.dragonfly.groups if f.dragonfly else None,
        dragonfly_global_links=f.dragonfly.global_links_per_switch if f.dragonfly else 1,
        management_ports=f.management_ports,
        routing_given=f.routing is not None,
    )


def with_transport(cluster: Cluster, kind: TransportKind, speed_gbit_s: float) -> Cluster:
    """``cluster`` with its compute fabric on transport ``kind`` and NICs of ``speed_gbit_s`` (what-if advice):
    the catalog entry :func:`pick_transport` would pick for a file saying so, and that transport's default
    routing unless the file named one."""
    spec = FabricSpec(transport=kind)
    transport = pick_transport(cluster.catalog, spec, speed_gbit_s)
    f = cluster.fabric
    fabric = replace(f, transport=transport, routing=f.routing if f.routing_given else DEFAULT_ROUTING[kind])
    nics = replace(cluster.compute_nics, speed_bytes_s=speed_gbit_s * units.Gbit)
    return replace(cluster, fabric=fabric, compute_nics=nics)


def load_cluster(path: Path | str) -> Cluster:
    """Read, validate and resolve a cluster file (YAML or JSON)."""
    p = Path(path)
    return cluster_from_mapping(read_mapping(p, "cluster"), source_name(p, "cluster"), p.parent)
