"""A scale-up link: the NVLink/NVSwitch, PCIe or xGMI fabric inside a node or an NVL rack."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from slowlink import units

# NCCL-achievable fraction of a scale-up link's per-GPU, per-direction line rate for ring traffic.
# Published: ~370 GB/s ring busbw on H100 NVLink4 (450 line) = 0.82 (nccl-tests issue 212, maintainer);
# 231.6 GB/s all_reduce busbw on A100 NVLink3 (300 line) = 0.77 (Azure ND A100 v4, 8 GiB). One constant
# for every generation: the mean, 0.80 (NCCL itself models ~20 GB/s per NVLink3/4 lane of 25).
SCALE_UP_EFFICIENCY = 0.80


class ScaleUpEntry(BaseModel):
    """One scale-up link in a catalog file."""

    model_config = ConfigDict(extra="forbid")

    bandwidth_gbyte_s: float = Field(gt=0, description="Per-GPU bandwidth, one direction, GB/s.")
    latency_us: float = Field(ge=0, description="One GPU-to-GPU hop, microseconds.")
    switched: bool = Field(description="True for a switch (NVSwitch, PCIe switch), false for a direct mesh.")
    sharp: bool = Field(description="The switch reduces in the network (NVLink SHARP, NCCL's NVLS).")


@dataclass(frozen=True)
class ScaleUpLink:
    """A scale-up link in SI units."""

    name: str
    bw_bytes_s: float
    latency_s: float
    switched: bool
    sharp: bool

    @classmethod
    def from_entry(cls, name: str, entry: ScaleUpEntry) -> ScaleUpLink:
        return cls(
            name=name,
            bw_bytes_s=entry.bandwidth_gbyte_s * units.GB,
            latency_s=entry.latency_us * units.US,
            switched=entry.switched,
            sharp=entry.sharp,
        )
