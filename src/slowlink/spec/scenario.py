"""The scenario file (``slowlink simulate``): a cluster file and the traffics that share its fabric at once.

Validated with pydantic (:class:`ScenarioSpec`, keys as written), then resolved once into frozen dataclasses
(:class:`Scenario`, :class:`Traffic`: sizes in bytes, times in seconds) that :mod:`slowlink.sim.scenario` runs.
What a traffic needs of the cluster (its ranks, an algorithm the fabric has) is checked there, against it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from slowlink import units
from slowlink.fileio import SPEC_CONFIG, check_kind, read_mapping, source_name, validated

Op = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"]
Algorithm = Literal["ring", "tree", "nvls", "nvls_tree", "pat", "hierarchical"]


class TrafficSpec(BaseModel):
    model_config = SPEC_CONFIG
    name: str = Field(description="Name shown in the report.")
    kind: Literal["collective", "checkpoint"] = Field(description="A collective, or a checkpoint burst.")
    op: Op | None = Field(None, description="collective: the operation.")
    size: str | float | None = Field(None, description="collective: size (nccl-tests), e.g. 1GiB.")
    ranks: list[int] | None = Field(None, description="collective: the communicator's ranks (default all).")
    first_rank: int | None = Field(None, ge=0, description="collective: first rank of a contiguous range.")
    count: int | None = Field(None, ge=2, description="collective: ranks in the contiguous range.")
    algorithm: Algorithm | None = Field(
        None, description="collective: force an algorithm (default: the analytical model's pick).")
    bytes_per_node: str | float | None = Field(None, description="checkpoint: bytes each node writes, e.g. 4GB.")
    start_us: float = Field(0.0, ge=0, description="When the traffic starts, microseconds.")

    @field_validator("size", "bytes_per_node")
    @classmethod
    def _size(cls, value: str | float | None) -> str | float | None:
        if value is not None and units.parse_size(value) <= 0:
            raise ValueError("must be > 0 bytes")
        return value


class ScenarioSpec(BaseModel):
    model_config = SPEC_CONFIG
    name: str | None = Field(None, description="Name shown in the report.")
    cluster: str = Field(description="Cluster file, relative to the scenario file.")
    traffic: list[TrafficSpec] = Field(min_length=1, description="Traffics that share the fabric.")

    @model_validator(mode="after")
    def _names_unique(self) -> ScenarioSpec:
        seen: dict[str, int] = {}
        for i, t in enumerate(self.traffic):
            if t.name in seen:
                raise ValueError(f"traffic.{i}.name ({t.name!r}) is also the name of traffic.{seen[t.name]}: "
                                 "each traffic needs its own name (the report keys its rows by name)")
            seen[t.name] = i
        return self


@dataclass(frozen=True)
class Traffic:
    """One traffic, resolved (fields as :class:`TrafficSpec` documents them; sizes in bytes, start in s)."""

    name: str
    kind: Literal["collective", "checkpoint"]
    op: Op | None = None
    size_bytes: float | None = None
    ranks: tuple[int, ...] | None = None
    first_rank: int | None = None
    count: int | None = None
    algorithm: Algorithm | None = None
    bytes_per_node: float | None = None
    start_s: float = 0.0

    @classmethod
    def of(cls, t: TrafficSpec) -> Traffic:
        return cls(t.name, t.kind, t.op, None if t.size is None else units.parse_size(t.size),
                   None if t.ranks is None else tuple(t.ranks), t.first_rank, t.count, t.algorithm,
                   None if t.bytes_per_node is None else units.parse_size(t.bytes_per_node), t.start_us * units.US)


@dataclass(frozen=True)
class Scenario:
    """A scenario file, resolved: its name (``scenario`` when none is given), its cluster file (relative to the
    scenario file) and its traffics in file order."""

    name: str
    cluster: str
    traffic: tuple[Traffic, ...]

    @classmethod
    def of(cls, spec: ScenarioSpec) -> Scenario:
        return cls(spec.name or "scenario", spec.cluster, tuple(Traffic.of(t) for t in spec.traffic))


def scenario_from_mapping(data: dict[str, Any], source: str = "scenario") -> Scenario:
    """Validate a parsed scenario file (or one built in code) and resolve it."""
    check_kind(data, "scenario", source)
    return Scenario.of(validated(ScenarioSpec, data, source, "scenario"))


def read_scenario(path: Path | str) -> tuple[Scenario, str]:
    """A scenario file, validated and resolved, and the name its messages lead with."""
    p = Path(path)
    source = source_name(p, "scenario")
    return scenario_from_mapping(read_mapping(p, "scenario"), source), source
