"""Processes by id: whether one still runs (the owner of an emulated run, the writer of a partial file)."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """Whether a process with id ``pid`` exists: signal 0 checks without sending anything (kill(2)); one owned by
    another user exists too (EPERM). No process has an id <= 0 (``kill(0, ...)`` would signal our own group)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
