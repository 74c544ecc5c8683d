"""The project's exception tree. User input errors carry the field, the value and the rule.

The CLI catches :class:`SlowlinkError`, prints its message and exits with code 2; anything else is a bug.
"""

from __future__ import annotations


class SlowlinkError(Exception):
    """Base of every error slowlink reports to a user (exit code 2, no traceback)."""

    exit_code = 2


class SpecError(SlowlinkError):
    """A cluster, workload or scenario file is missing, unreadable or invalid."""


class CatalogError(SpecError):
    """A name is not in the hardware catalog, or a catalog entry is invalid."""


class InfeasiblePlan(SlowlinkError):
    """A plan that cannot run: it does not fit in memory, or its parallelism does not divide the job."""


class BenchError(SlowlinkError):
    """A benchmark could not run or failed (missing torch, dead rank, unreachable rendezvous, wrong result)."""


class EmulationError(SlowlinkError):
    """The emulated cluster could not be built, used or removed."""


def field_error(field: str, value: object, rule: str) -> str:
    """The house style of a message: ``field (value) rule``, e.g. ``nodes (0) must be >= 1``."""
    return f"{field} ({value!r}) {rule}"


def line_error(source: str, lineno: int, line: str, rule: str) -> SpecError:
    """A line of a tool's output that breaks ``rule``: ``source:LINE: ('content') rule`` (content cut to 120)."""
    text = line.strip()
    if len(text) > 120:
        text = text[:117] + "..."
    return SpecError(f"{source}:{lineno}: ({text!r}) {rule}")
