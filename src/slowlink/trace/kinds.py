"""Kinds of device kernels and the time they cover, as Holistic Trace Analysis defines them.

HTA (facebookresearch/HolisticTraceAnalysis, MIT; definitions read from v0.5.0 on PyPI and v0.6.1 on GitHub)
sorts a kernel by its name, first match wins (``hta/utils/utils.py`` ``get_kernel_type``, patterns in
``hta/common/types.py``): communication (the name starts with ``nccl``, or, from v0.6, ``hccl``/``hip``-prefixed
collectives or contains ``ncclKernel``), memory (starts with ``Memcpy``/``Memset``, optionally ``hip``-prefixed,
or ``dma``), computation (everything else that is not a sync, a memcpy/memset or a launch), other. Times are
lengths of the union of a kind's intervals (``merge_kernel_intervals``: kernels on several streams that overlap
count once), and the temporal breakdown (``breakdown_analysis.get_temporal_breakdown``) splits the span from the
first kernel's start to the last kernel's end into idle (no kernel runs), compute (a computation kernel runs)
and the rest. Overlap (``communication_analysis.get_comm_comp_overlap``) = time a communication and a
computation kernel run together / time a communication kernel runs.
"""

from __future__ import annotations

import re

import numpy as np
from numpy.typing import NDArray

COMPUTATION, COMMUNICATION, MEMORY, OTHER = "computation", "communication", "memory", "other"
KINDS = (COMPUTATION, COMMUNICATION, MEMORY, OTHER)

# HTA v0.6.1 CommunicateKernelGroupingPattern (a superset of v0.5.0's ``^nccl``), MemoryKernelGroupingPattern,
# and the names ComputeKernelGroupingPattern excludes from computation (it is an inverse match); re.match anchors
# at the start as HTA's GroupingPattern.match does.
_COMMUNICATION = re.compile(r"nccl|hip|hccl|.*ncclKernel")
_MEMORY = re.compile(r"(hip)?Memcpy|(hip)?Memset|dma")
_NOT_COMPUTE = re.compile(r"nccl|.*Memcpy|.*Memset|.*dma|.*Sync|Stream Wait Event|cuda.*LaunchKernel|runFunction|"
                          r"hip|job_exe|packet|pe_exe|cpum_exe_subgraph|hccl|collective_subgraph_execution")


def kernel_kind(name: str) -> str:
    """The HTA kind of a device kernel by its name (module docstring)."""
    if _COMMUNICATION.match(name):
        return COMMUNICATION
    if _MEMORY.match(name):
        return MEMORY
    return OTHER if _NOT_COMPUTE.match(name) else COMPUTATION


Intervals = tuple[NDArray[np.float64], NDArray[np.float64]]


def merged(start: NDArray[np.float64], end: NDArray[np.float64]) -> Intervals:
    """The union of [start, end) intervals as disjoint sorted intervals (HTA's ``merge_kernel_intervals``: an
    interval that starts after every earlier one has ended opens a new group)."""
    if start.size == 0:
        return start, end
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    return s[new], np.maximum.reduceat(e, np.flatnonzero(new))


def length(iv: Intervals) -> float:
    """Total length of disjoint intervals."""
    return float(np.sum(iv[1] - iv[0]))


def overlap(a: Intervals, b: Intervals) -> float:
    """Length of the intersection of two unions: |A| + |B| - |A u B|."""
    both = merged(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]))
    return max(0.0, length(a) + length(b) - length(both))
