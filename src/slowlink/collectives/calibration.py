"""Calibrated profiles: a cluster's measured latency and bus bandwidth, which replace the NCCL model.

A profile (written by ``slowlink calibrate``, named by the cluster file's ``calibration:`` key) holds one
fit per op and scope (``scale-up``: every rank in one scale-up domain; ``network``: ranks span domains):

    time = hop_latency x ring_steps(op, n) + size x busbw_factor(op, n) / busbw

the alpha-beta form of a ring (Hockney 1994; Thakur et al. 2005), with nccl-tests' busbw factors
(doc/PERFORMANCE.md), so a fit made on n ranks predicts other rank counts of the same scope through the
ring's step count and bus factor. An op with no fit of its own uses the all_reduce fit of its scope.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from slowlink import units
from slowlink.collectives.ops import busbw_factor, ring_steps
from slowlink.errors import SpecError
from slowlink.fileio import format_validation_error, read_mapping

SCOPES = ("scale-up", "network")
PROFILE_KIND = "slowlink-calibration"


class OpFit(BaseModel):
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


class Profile(BaseModel):
    """A calibration profile file."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["slowlink-calibration"] = Field(description="Always slowlink-calibration.")
    cluster: str = Field(description="Name of the cluster the measurements were made on.")
    source: str = Field(description="The result file the fit came from.")
    created_utc: str = Field(description="When the profile was written.")
    fits: list[OpFit] = Field(min_length=1, description="One fit per op and scope.")

    def fit_for(self, op: str, scope: str) -> OpFit | None:
        """The fit of ``op`` in ``scope``, else that scope's all_reduce fit, else None."""
        by_key: dict[tuple[str, str], OpFit] = {(f.op, f.scope): f for f in self.fits}
        return by_key.get((op, scope)) or by_key.get(("all_reduce", scope))


@functools.lru_cache(maxsize=32)
def _load(path: str, mtime_ns: int) -> Profile:
    try:
        return Profile.model_validate(read_mapping(path))
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc, f"calibration {path}", "calibration")) from None


def load_profile(path: Path) -> Profile:
    """Read and validate a profile (cached until the file changes)."""
    if not path.is_file():
        raise SpecError(f"calibration ({str(path)!r}) does not exist: write it with `slowlink calibrate`")
    return _load(str(path), path.stat().st_mtime_ns)


def alpha_beta_time_s(op: str, size_bytes: float, ranks: int, hop_latency_s: float, busbw_bytes_s: float) -> float:
    """hop_latency x ring_steps(op, n) + size x busbw_factor(op, n) / busbw (module docstring)."""
    return hop_latency_s * ring_steps(op, ranks) + size_bytes * busbw_factor(op, ranks) / busbw_bytes_s


def calibrated_time_s(fit: OpFit, op: str, size_bytes: float, ranks: int) -> tuple[float, float]:
    """(time, latency part) of ``op`` from ``fit``."""
    hop = fit.hop_latency_us * units.US
    lat = hop * ring_steps(op, ranks)
    return alpha_beta_time_s(op, size_bytes, ranks, hop, fit.busbw_gbyte_s * units.GB), lat

