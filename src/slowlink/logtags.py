"""Prefixes a launcher writes before every line of a rank's output, and their removal.

Real captures are rarely a tool's bare stdout: ``mpirun --tag-output`` (Open MPI mpirun(1): "Tag each line of
output to stdout, stderr, and stddiag with ``[jobid, MCW_rank]<stdxxx>:``") prefixes every line, as the
kubeflow MPI operator's launcher logs show (tests/data/observe/real/SOURCES.md). Readers strip the tag first,
then read the line as the tool printed it.
"""

from __future__ import annotations

import re

_MPI_TAG = re.compile(r"^\[\d+,\d+\]<std(?:out|err|diag)>:")


def strip_launcher_tag(line: str) -> str:
    """``line`` without a leading ``[1,0]<stdout>:`` tag (unchanged when it has none)."""
    return _MPI_TAG.sub("", line, count=1)


__all__ = ["strip_launcher_tag"]
