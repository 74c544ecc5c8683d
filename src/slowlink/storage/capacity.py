"""Capacity: how many checkpoints fit on their tier beside the dataset, and when the tier is full.

  room          = tier capacity - dataset bytes (when the dataset lives on the same tier)
  fit           = floor(room / checkpoint bytes)
  needed        = keep_last + 1 (the new checkpoint is complete before the oldest is deleted, as
                  Hugging Face Trainer's save_total_limit rotation and Megatron-LM's keep-last policies do)
  with keep_every k: every k-th checkpoint stays, so one more is kept every k intervals:
  full after    = (fit - needed + 1) x k intervals (never without keep_every, if needed <= fit)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from slowlink import units
from slowlink.spec.storage import StorageDetails


@dataclass(frozen=True)
class Capacity:
    tier: str
    capacity_bytes: float | None
    dataset_bytes: float
    checkpoint_bytes: float
    fit: int | None  # checkpoints that fit; None when the capacity is not given
    needed: int
    full_after_s: float | None  # None: never full (or unknown)
    keep_every: int | None = None  # the retention's keep_every (every k-th checkpoint stays)

    def at_interval(self, interval_s: float) -> Capacity:
        """The same tier with checkpoints every ``interval_s``: when it is full changes, nothing else."""
        if self.fit is None:
            return self
        return replace(self, full_after_s=time_until_full_s(self.fit, self.needed, self.keep_every, interval_s))

    @property
    def fits(self) -> bool | None:
        return None if self.fit is None else self.fit >= self.needed

    def to_json(self) -> dict[str, object]:
        return {"tier": self.tier, "capacity_bytes": self.capacity_bytes, "dataset_bytes": self.dataset_bytes,
                "checkpoints_that_fit": self.fit, "checkpoints_needed": self.needed, "fits": self.fits,
                "full_after_hours": None if self.full_after_s is None else self.full_after_s / units.HOUR}


def checkpoints_that_fit(capacity_bytes: float, checkpoint_bytes: float, dataset_bytes: float = 0.0) -> int:
    """``floor((capacity - dataset) / checkpoint)``, never below 0."""
    return max(0, math.floor((capacity_bytes - dataset_bytes) / checkpoint_bytes))


def time_until_full_s(fit: int, needed: int, keep_every: int | None, interval_s: float | None) -> float | None:
    """Seconds until the tier is full: 0 if the retention needs more than fits; None if it never fills
    (no keep_every) or the interval is unknown; else ``(fit - needed + 1) x keep_every x interval``."""
    if fit < needed:
        return 0.0
    if keep_every is None or interval_s is None:
        return None
    return (fit - needed + 1) * keep_every * interval_s


def capacity(details: StorageDetails, checkpoint_bytes: float, dataset_bytes: float,
             interval_s: float | None) -> Capacity:
    """Checkpoints that fit on the checkpoint tier under the retention policy, and when it is full."""
    tier = details.tier(details.checkpoint_tier)
    data = dataset_bytes if details.data_tier == tier.name else 0.0
    needed = details.keep_last + 1
    if tier.capacity_bytes is None:
        return Capacity(tier.name, None, data, checkpoint_bytes, None, needed, None, details.keep_every)
    fit = checkpoints_that_fit(tier.capacity_bytes, checkpoint_bytes, data)
    return Capacity(tier.name, tier.capacity_bytes, data, checkpoint_bytes, fit, needed,
                    time_until_full_s(fit, needed, details.keep_every, interval_s), details.keep_every)
