"""The project's exception tree. User input errors carry the field, the value and the rule.

The CLI catches :class:`SlowlinkError`, prints its message and exits with code 2; anything else is a bug.
"""

from __future__ import annotations

import errno


class SlowlinkError(Exception):
    """Base of every error slowlink reports to a user (exit code 2, no traceback).

    ``rule`` names the rule that was broken (e.g. ``memory_fits``, ``batch_divides``, ``priced``), so that code
    which sorts failures (the design search) reads it instead of the message's text.
    """

    exit_code = 2
    rule = "other"

    def __init__(self, message: str = "", *, rule: str | None = None) -> None:
        super().__init__(message)
        if rule is not None:
            self.rule = rule

    def reworded(self, message: str) -> SlowlinkError:
        """The same error (class and rule) with another message, e.g. led by the files it concerns."""
        return type(self)(message, rule=self.rule)


class SpecError(SlowlinkError):
    """A cluster, workload or scenario file is missing, unreadable or invalid."""


class CatalogError(SpecError):
    """A name is not in the hardware catalog, or a catalog entry is invalid."""


class InfeasiblePlan(SlowlinkError):
    """A plan that cannot run: it does not fit in memory, or its parallelism does not divide the job."""


class PriceMissing(SpecError):
    """A part the price book has no price for (a server of this GPU, a switch, a NIC, a medium)."""

    rule = "priced"


class FabricMisfit(SpecError):
    """A fabric that cannot be built from the switches given: too many leaves, ports or NICs for the radix."""

    rule = "fabric_fits"


class BenchError(SlowlinkError):
    """A benchmark could not run or failed (missing torch, dead rank, unreachable rendezvous, wrong result)."""


class EmulationError(SlowlinkError):
    """The emulated cluster could not be built, used or removed."""


class SystemRefused(SlowlinkError):
    """The machine refused what a command needed: no space left, a quota, a read-only filesystem, no permission.

    Not bad input (2) and not a failed check (1): exit 74, ``EX_IOERR`` of BSD's sysexits.h. ``rule`` is
    ``no_space`` or ``permission``."""

    exit_code = 74


# errno -> (rule, what it means to the user)
REFUSALS = {errno.ENOSPC: ("no_space", "no space left on the device"),
            errno.EDQUOT: ("no_space", "disk quota exceeded"),
            errno.EROFS: ("permission", "the filesystem is read-only"),
            errno.EACCES: ("permission", "permission denied"),
            errno.EPERM: ("permission", "operation not permitted")}


def system_refusal(exc: BaseException, where: str | None = None) -> SystemRefused | None:
    """``exc`` as a :class:`SystemRefused` when it is an OSError whose errno is in :data:`REFUSALS`, else None; the
    message names the path (the error's own, else ``where``, the place the caller was writing) and what to do."""
    if not isinstance(exc, OSError) or exc.errno not in REFUSALS:
        return None
    rule, what = REFUSALS[exc.errno]
    where = exc.filename if exc.filename is not None else where or "(no path given)"
    fix = ("free space or point the command elsewhere" if rule == "no_space"
           else "fix its permissions or use another path")
    return SystemRefused(f"{where}: {what} ({errno.errorcode[exc.errno]}): {fix}", rule=rule)


def field_error(field: str, value: object, rule: str) -> str:
    """The house style of a message: ``field (value) rule``, e.g. ``nodes (0) must be >= 1``."""
    return f"{field} ({value!r}) {rule}"


def line_error(source: str, lineno: int, line: str, rule: str) -> SpecError:
    """A line of a tool's output that breaks ``rule``: ``source:LINE: ('content') rule`` (content cut to 120)."""
    text = line.strip()
    if len(text) > 120:
        text = text[:117] + "..."
    return SpecError(f"{source}:{lineno}: ({text!r}) {rule}")
