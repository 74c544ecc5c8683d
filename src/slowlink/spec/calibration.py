"""A calibrated profile's file (written by ``slowlink calibrate``, named by a cluster file's ``calibration:`` key):
one fit per op and scope of the alpha-beta ring model of :mod:`slowlink.collectives.calibration`.

Validated with pydantic (:class:`ProfileSpec`, :class:`OpFitSpec`: the file's keys, in microseconds and GB/s
as written), then resolved once into frozen dataclasses in SI units (:class:`Profile`, :class:`Fit`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from slowlink import units
from slowlink.errors import SpecError
from slowlink.fileio import read_mapping, validated

SCOPES = ("scale-up", "network")
PROFILE_KIND = "slowlink-calibration"


class OpFitSpec(BaseModel):
    """One fitted op: the latency per ring step and the bus bandwidth."""

    model_config = ConfigDict(extra="forbid")
    op: Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce",
                "send_recv"] = Field(description="The collective measured.")
    scope: Literal["scale-up", "network"] = Field(description="scale-up: one domain; network: across domains.")
    ranks: int = Field(ge=2, description="Ranks of the measured sweep.")
    backend: str = Field(description="torch.distributed backend of the measurement (gloo, nccl).")
    hop_latency_us: float = Field(ge=0, description="Latency per ring step, microseconds.")
    busbw_gbyte_s: float = Field(gt=0, description="Asymptotic bus bandwidth, GB/s.")
    min_size_bytes: float = Field(ge=0, description="Smallest size the fit used.")
    max_size_bytes: float = Field(gt=0, description="Largest size the fit used.")
    max_abs_error_pct: float = Field(ge=0, description="Worst |model - measured| / measured over those sizes.")


class ProfileSpec(BaseModel):
    """A calibration profile file."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["slowlink-calibration"] = Field(description="Always slowlink-calibration.")
    cluster: str = Field(description="Name of the cluster the measurements were made on.")
    source: str = Field(description="The result file the fit came from.")
    created_utc: str = Field(description="When the profile was written.")
    fits: list[OpFitSpec] = Field(min_length=1, description="One fit per op and scope.")


@dataclass(frozen=True)
class Fit:
    """One fitted op, resolved (SI units): the latency per ring step and the asymptotic bus bandwidth."""

    op: str
    scope: str
    ranks: int
    backend: str
    hop_latency_s: float
    busbw_bytes_s: float

    @classmethod
    def of(cls, f: OpFitSpec) -> Fit:
        return cls(f.op, f.scope, f.ranks, f.backend, f.hop_latency_us * units.US, f.busbw_gbyte_s * units.GB)


@dataclass(frozen=True)
class Profile:
    """A calibration profile, resolved: the cluster it was measured on and its fits."""

    cluster: str
    source: str
    fits: tuple[Fit, ...]

    def fit_for(self, op: str, scope: str) -> Fit | None:
        """The fit of ``op`` in ``scope``, else that scope's all_reduce fit, else None."""
        by_key = {(f.op, f.scope): f for f in self.fits}
        return by_key.get((op, scope)) or by_key.get(("all_reduce", scope))


@functools.lru_cache(maxsize=32)
def _load(path: str, mtime_ns: int) -> Profile:
    spec = validated(ProfileSpec, read_mapping(path), f"calibration {path}", "calibration")
    return Profile(spec.cluster, spec.source, tuple(Fit.of(f) for f in spec.fits))


def load_profile(path: Path) -> Profile:
    """Read and validate a profile (cached until the file changes)."""
    if not path.is_file():
        raise SpecError(f"calibration ({str(path)!r}) does not exist: write it with `slowlink calibrate`")
    return _load(str(path), path.stat().st_mtime_ns)


