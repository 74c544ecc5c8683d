"""The search file (``slowlink search SPACE.yaml``): hardware axes x parallel axes, a workload file, a token budget,
constraints, and the storage and reliability every design shares.

Validated with pydantic (:class:`SpaceSpec`, keys as written); the constraints are resolved into the frozen
:class:`Limits`. :mod:`slowlink.search.space` builds the space's designs and layouts from the validated axes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator

from slowlink.fileio import SPEC_CONFIG
from slowlink.spec.reliability import ReliabilitySpec
from slowlink.spec.sites import InterconnectSpec
from slowlink.spec.storage import StorageSpec
from slowlink.spec.workload import SyncSpec

Count = Annotated[int, Field(ge=1)]
Positive = Annotated[float, Field(gt=0)]


def _nonempty(v: list[Any]) -> list[Any]:
    if not v:
        raise ValueError("must list at least one value")
    if len(set(map(repr, v))) != len(v):
        raise ValueError(f"lists a value twice ({v})")
    return v


class HardwareAxes(BaseModel):
    model_config = SPEC_CONFIG
    gpu: list[str] = Field(description="Catalog GPU names with a server in the price book.")
    nodes: list[Count] = Field(description="Servers (NVL72: compute trays).")
    nics_per_node: list[Count] = Field(default_factory=lambda: [8], description="Compute NICs per server.")
    nic_speed_gbit_s: list[Positive] = Field(default_factory=lambda: [400.0], description="NIC line rates.")
    transport: list[Literal["infiniband", "roce"]] = Field(["infiniband"],
                                                           description="Scale-out transports.")
    topology: list[Literal["fat-tree", "rail-optimized"]] = Field(["rail-optimized"],
                                                                  description="Fabric shapes.")
    oversubscription: list[Annotated[float, Field(ge=1)]] = Field(default_factory=lambda: [1.0],
                                                                  description="Leaf ratios (down:up), >= 1.")

    _check = field_validator("*")(_nonempty)


class ParallelAxes(BaseModel):
    model_config = SPEC_CONFIG
    tp: list[Count] = Field(default_factory=lambda: [1], description="Tensor-parallel sizes.")
    pp: list[Count] = Field(default_factory=lambda: [1], description="Pipeline stages.")
    cp: list[Count] = Field(default_factory=lambda: [1], description="Context-parallel sizes.")
    ep: list[Count] = Field(default_factory=lambda: [1], description="Expert-parallel sizes.")
    vp: list[Count] = Field(default_factory=lambda: [1], description="Virtual stages per pipeline rank.")
    micro_batch: list[Count] = Field(default_factory=lambda: [1], description="Micro-batch sizes.")
    zero: list[Annotated[int, Field(ge=0, le=3)]] = Field(default_factory=lambda: [1], description="ZeRO stages.")
    recompute: list[Literal["none", "selective", "full"]] = Field(["selective"],
                                                                  description="Activation recomputation.")

    _check = field_validator("*")(_nonempty)


class SitesAxes(BaseModel):
    model_config = SPEC_CONFIG
    count: list[Count] = Field(description="Sites each design's nodes are split into, in equal shares (1: one "
                               "building, no long haul).")
    links: list[Count] | None = Field(None, description="Long-haul links leaving each site (the DCI bandwidth); "
                                      "default: interconnect.links.")
    interconnect: InterconnectSpec = Field(description="What joins the sites of every design with more than one "
                                           "(the cluster file's interconnect: section; its links: the default).")

    @field_validator("count", "links")
    @classmethod
    def _listed(cls, v: list[Any] | None) -> list[Any] | None:
        return None if v is None else _nonempty(v)


class Constraints(BaseModel):
    model_config = SPEC_CONFIG
    budget_usd: float | None = Field(None, gt=0, description="Most capex, USD.")
    power_kw: float | None = Field(None, gt=0, description="Most facility power, kW.")
    max_gpus: int | None = Field(None, ge=1, description="Most GPUs.")
    max_nodes_per_site: int | None = Field(None, ge=1, description="Most nodes one site (building) holds: the "
                                           "power or floor space that makes a second site the question.")
    deadline_days: float | None = Field(None, gt=0, description="Train the token budget within this, days.")


class SpaceSpec(BaseModel):
    """The search file, as written."""

    model_config = SPEC_CONFIG
    name: str = Field(description="Name shown in reports.")
    workload: str = Field(description="Workload file, relative to the search file; its parallel section is "
                          "replaced by each configuration's (dp = GPUs / (tp pp cp)).")
    tokens: float = Field(gt=0, description="Token budget of the training run.")
    prices: str | None = Field(None, description="Your quotes, relative to the search file (--prices keys).")
    hardware: HardwareAxes = Field(description="Hardware axes.")
    parallel: ParallelAxes = Field(default_factory=ParallelAxes, description="Parallel-layout axes.")
    constraints: Constraints = Field(default_factory=Constraints, description="Limits a design must meet.")
    storage: StorageSpec | None = Field(None, description="The shared storage every design gets (the cluster "
                                        "file's storage: section): prices the data stall and the checkpoints.")
    reliability: ReliabilitySpec | None = Field(None, description="Failure rates and recovery times of every "
                                                "design (the cluster file's reliability: section).")
    sites: SitesAxes | None = Field(None, description="Split each design over sites joined by a long haul: site "
                                    "counts, DCI links per site and the interconnect (docs/sites.md).")
    sync: list[SyncSpec] | None = Field(None, description="How the sites' replicas sync (the workload's sync: "
                                        "section), one option per entry; a one-site design runs the first only.")

    @field_validator("sync")
    @classmethod
    def _syncs(cls, v: list[Any] | None) -> list[Any] | None:
        return None if v is None else _nonempty(v)


@dataclass(frozen=True)
class Limits:
    """What a design must meet (fields as :class:`Constraints` documents them; None: no limit)."""

    budget_usd: float | None = None
    power_kw: float | None = None
    max_gpus: int | None = None
    deadline_days: float | None = None
    max_nodes_per_site: int | None = None

    @classmethod
    def of(cls, c: Constraints) -> Limits:
        return cls(c.budget_usd, c.power_kw, c.max_gpus, c.deadline_days, c.max_nodes_per_site)

    def given(self) -> dict[str, float]:
        """The limits set, by name."""
        return {k: v for k, v in asdict(self).items() if v is not None}



