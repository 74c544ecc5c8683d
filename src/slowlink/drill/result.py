"""What a fault drill found (:mod:`slowlink.drill.harness`): the recovery phases it measured, a damaged checkpoint
passed over, failed saves, a refused launcher, and the verdict; ``to_json`` keys are the drill's JSON contract."""

from __future__ import annotations

from dataclasses import dataclass, field

from slowlink.drill.launchers import Refusal
from slowlink.errors import REFUSALS
from slowlink.reliability.recovery import RecoveryCost

DAMAGE = ("corrupt-checkpoint", "truncate-checkpoint")  # faults that damage the newest committed checkpoint


@dataclass(frozen=True)
class MeasuredRecovery:
    """Seconds of each recovery phase the drill's events show (None where an event is missing: the job never
    restarted, or never got that far)."""

    detect_s: float | None = None
    restart_s: float | None = None
    restore_s: float | None = None
    recompute_s: float | None = None

    @property
    def total_s(self) -> float | None:
        """Their sum, when every phase was seen."""
        vals = (self.detect_s, self.restart_s, self.restore_s, self.recompute_s)
        return None if any(v is None for v in vals) else sum(v for v in vals if v is not None)

    def to_json(self) -> dict[str, float | None]:
        return {"detect_s": self.detect_s, "restart_s": self.restart_s, "restore_s": self.restore_s,
                "recompute_s": self.recompute_s}


@dataclass(frozen=True)
class Fallback:
    """A committed checkpoint the resumed job found damaged and passed over: its step, the step it resumed from
    instead (0: from scratch), and the problems its verification found (file and rule)."""

    from_step: int
    to_step: int
    problems: tuple[str, ...]

    @property
    def lost_steps(self) -> int:
        """Committed steps the damage cost: recomputed from the older checkpoint."""
        return self.from_step - self.to_step

    def to_json(self) -> dict[str, object]:
        return {"from_step": self.from_step, "to_step": self.to_step, "lost_steps": self.lost_steps,
                "why": list(self.problems)}


@dataclass(frozen=True)
class FailedSave:
    """A checkpoint save that raised on a rank: the step, the rank, the exception's type and its errno's name."""

    step: int
    rank: int
    error: str
    errno_name: str | None

    def to_json(self) -> dict[str, object]:
        return {"step": self.step, "rank": self.rank, "error": self.error, "errno": self.errno_name}


@dataclass(frozen=True)
class DrillResult:
    """What the drill measured and what the recovery model predicted (``to_json`` keys are a contract)."""

    fault: str
    recovered: bool
    state_equal: bool
    committed_steps_lost: int
    uncommitted_steps_lost: int
    restarts: int
    measured: MeasuredRecovery
    predicted: RecoveryCost
    predicted_recompute_s: float
    reason: str
    leftover_pids: list[int]
    fallback: Fallback | None = None
    refused: Refusal | None = None
    orphans: list[int] = field(default_factory=list)
    saves_failed: tuple[FailedSave, ...] = ()
    run_id: str = ""

    def refused_by_system(self) -> FailedSave | None:
        """The failed save the machine refused (no space, no permission: :data:`slowlink.errors.REFUSALS`) when the
        drill failed and did not strike the full disk itself; None otherwise."""
        import errno

        if self.ok or self.fault == "disk-full":
            return None
        return next((s for s in self.saves_failed
                     if s.errno_name is not None and getattr(errno, s.errno_name, None) in REFUSALS), None)

    @property
    def lost_committed_steps(self) -> int:
        """Committed steps the fault destroyed (a damaged checkpoint passed over) and the job recomputed; the
        recovery itself lost none only when ``committed_steps_lost`` is 0."""
        return self.fallback.lost_steps if self.fallback is not None else 0

    @property
    def ok(self) -> bool:
        damaged_seen = self.fault not in DAMAGE or self.fallback is not None
        refused = self.fault != "double-launch" or self.refused is not None
        refused = refused and (self.fault != "disk-full" or any(s.errno_name == "ENOSPC" for s in self.saves_failed))
        return (self.recovered and self.state_equal and self.committed_steps_lost == 0 and not self.leftover_pids
                and damaged_seen and refused and not self.orphans)

    @property
    def predicted_recovery_s(self) -> float:
        return self.predicted.total_s + self.predicted_recompute_s

    @property
    def measured_recovery_s(self) -> float | None:
        return self.measured.total_s

    def to_json(self) -> dict[str, object]:
        p = self.predicted
        return {"run_id": self.run_id, "fault": self.fault, "recovered": self.recovered,
                "state_equal": self.state_equal,
                "committed_steps_lost": self.committed_steps_lost,
                "uncommitted_steps_lost": self.uncommitted_steps_lost, "restarts": self.restarts,
                **self.measured.to_json(), "recovery_s": self.measured_recovery_s,
                "predicted_recovery_s": self.predicted_recovery_s,
                "predicted": {"detect_s": p.detect_s, "restart_s": p.restart_s, "restore_s": p.restore_s,
                              "recompute_s": self.predicted_recompute_s},
                "ok": self.ok, "reason": self.reason, "leftover_pids": self.leftover_pids,
                "fallback": None if self.fallback is None else self.fallback.to_json(),
                "lost_committed_steps": self.lost_committed_steps,
                "refused": None if self.refused is None else self.refused.to_json(), "orphans": self.orphans,
                "failed_saves": [s.to_json() for s in self.saves_failed]}
