"""Megatron rank order: tp fastest, then cp, dp, pp; EP carved out of DP."""

from __future__ import annotations

import pytest

from slowlink.workload.placement import dimension_groups
from slowlink.workload.spec import ParallelSpec

P = ParallelSpec(tp=2, cp=2, dp=4, pp=2, ep=2)


def test_tp_groups_are_consecutive() -> None:
    assert dimension_groups(P, "tp")[:2] == [[0, 1], [2, 3]]


def test_dp_group_stride_is_tp_times_cp() -> None:
    assert dimension_groups(P, "dp")[0] == [0, 4, 8, 12]


def test_pp_group_stride_is_tp_cp_dp() -> None:
    assert dimension_groups(P, "pp")[0] == [0, 16]


def test_ep_groups_split_the_dp_group() -> None:
    assert dimension_groups(P, "ep")[:2] == [[0, 4], [1, 5]]


def test_cp_and_dp_cp() -> None:
    assert dimension_groups(P, "cp")[0] == [0, 2]
    assert dimension_groups(P, "dp_cp")[0] == [0, 2, 4, 6, 8, 10, 12, 14]


@pytest.mark.parametrize("dim", ["tp", "cp", "dp", "ep", "pp", "dp_cp"])
def test_every_dimension_partitions_the_ranks(dim: str) -> None:
    groups = dimension_groups(P, dim)  # type: ignore[arg-type]
    flat = sorted(r for g in groups for r in g)
    assert flat == list(range(32))
