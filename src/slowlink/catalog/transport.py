"""A scale-out transport: what a NIC of one kind and speed delivers to NCCL, and at what latency."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from slowlink import units

TransportKind = Literal["infiniband", "roce", "ethernet"]


class TransportEntry(BaseModel):
    """One transport in a catalog file."""

    model_config = ConfigDict(extra="forbid")

    kind: TransportKind = Field(description="infiniband, roce or ethernet (no RDMA).")
    speed_gbit_s: float = Field(gt=0, description="Nominal port speed this entry was measured at, Gbit/s.")
    efficiency: float = Field(gt=0, le=1, description="NCCL busbw per NIC / line rate on an idle fabric.")
    latency_us: float = Field(ge=0, description="One network traversal as NCCL charges it, microseconds.")
    rdma: bool = Field(description="GPUDirect RDMA available.")
    lossless: bool = Field(description="Link-level flow control keeps the fabric from dropping.")
    tail_penalty: float = Field(0.0, ge=0, lt=1, description="Fraction of bandwidth lost to tail latency.")


@dataclass(frozen=True)
class Transport:
    """A transport in SI units."""

    name: str
    kind: str
    nominal_bytes_s: float
    efficiency: float
    latency_s: float
    rdma: bool
    lossless: bool
    tail_penalty: float

    @classmethod
    def from_entry(cls, name: str, entry: TransportEntry) -> Transport:
        return cls(
            name=name,
            kind=entry.kind,
            nominal_bytes_s=entry.speed_gbit_s * units.Gbit,
            efficiency=entry.efficiency,
            latency_s=entry.latency_us * units.US,
            rdma=entry.rdma,
            lossless=entry.lossless,
            tail_penalty=entry.tail_penalty,
        )
