"""Calibrated profiles: a cluster's measured latency and bus bandwidth, which replace the NCCL model.

A profile (written by ``slowlink calibrate``, named by the cluster file's ``calibration:`` key) holds one
fit per op and scope (``scale-up``: every rank in one scale-up domain; ``network``: ranks span domains):

    time = hop_latency x ring_steps(op, n) + size x busbw_factor(op, n) / busbw

the alpha-beta form of a ring (Hockney 1994; Thakur et al. 2005), with nccl-tests' busbw factors
(doc/PERFORMANCE.md), so a fit made on n ranks predicts other rank counts of the same scope through the
ring's step count and bus factor. An op with no fit of its own uses the all_reduce fit of its scope.
"""

from __future__ import annotations

from slowlink.collectives.ops import busbw_factor, ring_steps
from slowlink.spec.calibration import Fit, load_profile

__all__ = ["alpha_beta_time_s", "calibrated_time_s", "load_profile"]


def alpha_beta_time_s(op: str, size_bytes: float, ranks: int, hop_latency_s: float, busbw_bytes_s: float) -> float:
    """hop_latency x ring_steps(op, n) + size x busbw_factor(op, n) / busbw (module docstring)."""
    return hop_latency_s * ring_steps(op, ranks) + size_bytes * busbw_factor(op, ranks) / busbw_bytes_s


def calibrated_time_s(fit: Fit, op: str, size_bytes: float, ranks: int) -> tuple[float, float]:
    """(time, latency part) of ``op`` from ``fit``."""
    lat = fit.hop_latency_s * ring_steps(op, ranks)
    return alpha_beta_time_s(op, size_bytes, ranks, fit.hop_latency_s, fit.busbw_bytes_s), lat

