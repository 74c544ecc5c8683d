"""MIG (Multi-Instance GPU) profiles and the packing of GPU instances on one GPU.

A MIG-enabled A100/H100 has 7 compute slices and 8 memory slices; a profile ``Ng.Mgb`` takes N compute slices
and a fixed number of memory slices, and may start only at the memory slices NVIDIA lists for it
(``data/mig_profiles.yaml``, from the MIG user guide). One GPU's instances are a bit mask of its 8 memory
slices plus a count of compute slices used.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources

import yaml

from slowlink.errors import SpecError

COMPUTE_SLICES = 7  # MIG user guide: A100/H100 expose 7 GPCs as compute slices
MEMORY_SLICES = 8  # and 8 memory slices


@dataclass(frozen=True)
class MigProfile:
    """One GPU-instance profile: its slices and the memory slices it may start at."""

    name: str
    compute_slices: int
    memory_slices: int
    placements: tuple[int, ...]

    @property
    def compute_fraction(self) -> float:
        """Share of the GPU's SMs ("Fraction of SMs" in the MIG user guide)."""
        return self.compute_slices / COMPUTE_SLICES

    @property
    def memory_fraction(self) -> float:
        """Share of the GPU's memory ("Fraction of Memory")."""
        return self.memory_slices / MEMORY_SLICES

    def masks(self) -> tuple[int, ...]:
        """The memory-slice bit mask of each placement."""
        block = (1 << self.memory_slices) - 1
        return tuple(block << start for start in self.placements)


@functools.cache
def _table() -> dict[str, dict[str, MigProfile]]:
    text = resources.files("slowlink.share").joinpath("data/mig_profiles.yaml").read_text()
    raw = yaml.safe_load(text)["gpus"]
    return {gpu: {name: MigProfile(name, p["compute_slices"], p["memory_slices"], tuple(p["placements"]))
                  for name, p in profiles.items()} for gpu, profiles in raw.items()}


def mig_gpus() -> tuple[str, ...]:
    """The catalog GPU names that have MIG profiles here."""
    return tuple(_table())


def profiles(gpu: str) -> dict[str, MigProfile]:
    """The MIG profiles of ``gpu`` by name; a GPU without MIG profiles is a :class:`SpecError`."""
    table = _table()
    if gpu not in table:
        raise SpecError(f"cluster.gpu ({gpu!r}) has no MIG profiles here: slicing mig needs one of "
                        f"{', '.join(table)}")
    return table[gpu]


def smallest_fitting(gpu: str, compute_fraction: float, memory_fraction: float) -> MigProfile:
    """The profile with the fewest compute slices, then memory slices, that holds at least ``compute_fraction``
    of the SMs and ``memory_fraction`` of the memory (the whole GPU at worst)."""
    eps = 1e-9
    fits = [p for p in profiles(gpu).values()
            if p.compute_fraction + eps >= compute_fraction and p.memory_fraction + eps >= memory_fraction]
    return min(fits, key=lambda p: (p.compute_slices, p.memory_slices))


def place(mask: int, used_compute: int, profile: MigProfile) -> int | None:
    """The memory-slice mask of the first free placement of ``profile`` on a GPU whose instances occupy
    ``mask`` and ``used_compute`` compute slices, or None when it does not fit."""
    if used_compute + profile.compute_slices > COMPUTE_SLICES:
        return None
    for m in profile.masks():
        if not mask & m:
            return m
    return None
