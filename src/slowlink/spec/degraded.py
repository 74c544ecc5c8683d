"""Degraded parts and per-rank variability in the cluster spec: the ``degraded:`` and ``variability:`` keys.

Real clusters are not uniform: one NIC that trained at 200G on a 400G port, one cable that retransmits, one
GPU that throttles on heat, one node whose messages are late. Each part is one entry of ``degraded:``:

* ``{node: 3, nic: 0, rate: 0.5}``: NIC 0 of node 3 carries half its line rate (both directions);
* ``{link: "leaf:2->spine:0", rate: 0.5}``: one fabric cable (a link name of the topology graph, both
  directions) at half rate;
* ``{node: 5, gpu: 2, clock: 0.9}``: GPU 2 of node 5 at 90% of its FLOP/s; ``{node: 5, clock: 0.9}``: every
  GPU of node 5;
* ``{node: 7, delay_ms: 5}``: every message into or out of node 7's NICs waits 5 ms more (one way).

``variability: {compute_cv: 0.02, network_cv: 0.05}`` gives the per-rank coefficient of variation of the
compute and network time of each step (:mod:`slowlink.straggler`). Key names are a contract: added, never
renamed (docs/straggler.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from slowlink import units
from slowlink.errors import field_error
from slowlink.fileio import SPEC_CONFIG


class DegradedPartSpec(BaseModel):
    """One degraded part, as written."""

    model_config = SPEC_CONFIG
    node: int | None = Field(None, ge=0, description="Physical node index (0-based) the part sits in.")
    nic: int | None = Field(None, ge=0, description="Compute NIC index inside the node (needs node and rate).")
    gpu: int | None = Field(None, ge=0, description="GPU index inside the node (needs node and clock).")
    link: str | None = Field(None, min_length=3, description="A fabric link name of the topology graph, "
                             "e.g. leaf:2->spine:0 (both directions of the cable are degraded).")
    rate: float | None = Field(None, gt=0, le=1, description="Fraction of the line rate a NIC or link carries.")
    clock: float | None = Field(None, gt=0, le=1, description="Fraction of its FLOP/s a GPU (or a node's GPUs) "
                                "sustains, e.g. 0.9 for a GPU throttling on heat.")
    delay_ms: float | None = Field(None, gt=0, description="One-way delay added to every message through the "
                                   "node's NICs, milliseconds.")

    @model_validator(mode="after")
    def _one_part(self) -> DegradedPartSpec:
        if self.link is not None:
            if self.node is not None or self.nic is not None or self.gpu is not None or self.rate is None \
                    or self.clock is not None or self.delay_ms is not None:
                raise ValueError(field_error("link", self.link, "takes rate only: {link: NAME, rate: FRACTION}"))
            return self
        if self.node is None:
            raise ValueError("a degraded part needs node (with nic, gpu, clock or delay_ms) or link")
        if self.nic is not None and (self.rate is None or self.gpu is not None or self.clock is not None):
            raise ValueError(field_error("nic", self.nic, "takes rate only: {node: N, nic: I, rate: FRACTION}"))
        if self.gpu is not None and (self.clock is None or self.rate is not None):
            raise ValueError(field_error("gpu", self.gpu, "takes clock only: {node: N, gpu: G, clock: FRACTION}"))
        if self.nic is None and self.rate is not None:
            raise ValueError(field_error("rate", self.rate, "needs nic (a NIC of the node) or link"))
        if self.nic is None and self.clock is None and self.delay_ms is None:
            raise ValueError(field_error("node", self.node, "needs nic + rate, gpu + clock, clock or delay_ms"))
        return self


class VariabilitySpec(BaseModel):
    """Per-rank variability of each step's compute and network time."""

    model_config = SPEC_CONFIG
    compute_cv: float = Field(0.0, ge=0, le=1, description="Coefficient of variation of one rank's compute "
                              "time per synchronisation interval (std / mean), e.g. 0.02.")
    network_cv: float = Field(0.0, ge=0, le=1, description="Coefficient of variation of one rank's "
                              "communication time per collective.")
    distribution: Literal["normal", "lognormal"] = Field("normal", description="Shape of a rank's time.")
    seed: int = Field(0, description="Seed of the Monte Carlo check.")


@dataclass(frozen=True)
class DegradedPart:
    """One degraded part, resolved from its :class:`DegradedPartSpec` (fields as documented there; a probe that
    names a slow part makes one directly)."""

    node: int | None = None
    nic: int | None = None
    gpu: int | None = None
    link: str | None = None
    rate: float | None = None
    clock: float | None = None
    delay_ms: float | None = None

    @classmethod
    def of(cls, spec: DegradedPartSpec) -> DegradedPart:
        return cls(**spec.model_dump())


@dataclass(frozen=True)
class Variability:
    """A cluster's ``variability:`` section, resolved (every field as :class:`VariabilitySpec` documents it)."""

    compute_cv: float
    network_cv: float
    distribution: Literal["normal", "lognormal"]
    seed: int

    @classmethod
    def of(cls, spec: VariabilitySpec) -> Variability:
        return cls(**spec.model_dump())


@dataclass(frozen=True)
class Degraded:
    """The degraded parts in SI units, keyed for the models (empty: a uniform cluster)."""

    nic_rate: dict[tuple[int, int], float] = field(default_factory=dict)   # (node, nic) -> fraction
    link_rate: dict[str, float] = field(default_factory=dict)               # link name -> fraction
    gpu_clock: dict[tuple[int, int], float] = field(default_factory=dict)  # (node, gpu) -> fraction
    node_delay_s: dict[int, float] = field(default_factory=dict)           # node -> added one-way delay
    names: tuple[str, ...] = ()                                             # each part in words, spec order

    def __bool__(self) -> bool:
        return bool(self.nic_rate or self.link_rate or self.gpu_clock or self.node_delay_s)


def part_name(p: DegradedPart) -> str:
    """A part in words, e.g. ``node 3 NIC 0 at 50%``."""
    if p.link is not None:
        return f"link {p.link} at {p.rate:.0%}"
    words = [f"node {p.node}"]
    if p.nic is not None:
        words.append(f"NIC {p.nic} at {p.rate:.0%}")
    if p.gpu is not None:
        words.append(f"GPU {p.gpu} at {p.clock:.0%} clock")
    elif p.clock is not None:
        words.append(f"every GPU at {p.clock:.0%} clock")
    if p.delay_ms is not None:
        words.append(f"+{p.delay_ms:g} ms one way")
    return " ".join(words)


def check_degraded(parts: list[DegradedPartSpec], nodes: int, gpus_per_node: int, nics_per_node: int) -> None:
    """Indices inside the cluster: node < nodes, nic < nics.compute.per_node, gpu < gpus_per_node."""
    for i, p in enumerate(parts):
        if p.node is not None and p.node >= nodes:
            raise ValueError(field_error(f"degraded.{i}.node", p.node, f"must be < nodes ({nodes})"))
        if p.nic is not None and p.nic >= nics_per_node:
            raise ValueError(field_error(f"degraded.{i}.nic", p.nic,
                                         f"must be < nics.compute.per_node ({nics_per_node})"))
        if p.gpu is not None and p.gpu >= gpus_per_node:
            raise ValueError(field_error(f"degraded.{i}.gpu", p.gpu, f"must be < gpus_per_node ({gpus_per_node})"))


def resolve_degraded(parts: Sequence[DegradedPart], gpus_per_node: int) -> Degraded:
    """The parts keyed for the models; a part named twice keeps its worst value (lowest rate, most delay)."""
    d = Degraded(names=tuple(part_name(p) for p in parts))
    for p in parts:
        if p.link is not None and p.rate is not None:
            d.link_rate[p.link] = min(p.rate, d.link_rate.get(p.link, 1.0))
            continue
        node = p.node if p.node is not None else 0
        if p.nic is not None and p.rate is not None:
            d.nic_rate[(node, p.nic)] = min(p.rate, d.nic_rate.get((node, p.nic), 1.0))
        if p.clock is not None:
            for g in [p.gpu] if p.gpu is not None else range(gpus_per_node):
                d.gpu_clock[(node, g)] = min(p.clock, d.gpu_clock.get((node, g), 1.0))
        if p.delay_ms is not None:
            d.node_delay_s[node] = max(p.delay_ms * units.MS, d.node_delay_s.get(node, 0.0))
    return d
