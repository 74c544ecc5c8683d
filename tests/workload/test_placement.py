"""Megatron rank order: tp fastest, then cp, dp, pp; EP carved out of DP."""

from __future__ import annotations

import itertools

import pytest

from slowlink.spec.workload import Parallel
from slowlink.workload.placement import dimension_groups

P = Parallel.of(tp=2, cp=2, dp=4, pp=2, ep=2)


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


@pytest.mark.parametrize("dim", ["tp", "cp", "dp", "ep", "pp", "dp_cp", "tp_cp"])
def test_every_dimension_partitions_the_ranks(dim: str) -> None:
    groups = dimension_groups(P, dim)  # type: ignore[arg-type]
    flat = sorted(r for g in groups for r in g)
    assert flat == list(range(32))


META = Parallel.of(tp=2, cp=2, dp=4, pp=2, ep=2, order="tp-cp-pp-dp")  # Dubey et al. 2024, Sec. 3.3.2


def test_default_order_is_megatron() -> None:
    assert P.order == "tp-cp-dp-pp"


def test_meta_order_puts_pp_inside_dp() -> None:
    # [TP, CP, PP, DP]: a pipeline's stages are tp*cp ranks apart, a DP group spans tp*cp*pp strides.
    assert dimension_groups(META, "tp")[:2] == [[0, 1], [2, 3]]
    assert dimension_groups(META, "cp")[0] == [0, 2]
    assert dimension_groups(META, "pp")[0] == [0, 4]
    assert dimension_groups(META, "dp")[0] == [0, 8, 16, 24]
    assert dimension_groups(META, "ep")[:2] == [[0, 8], [1, 9]]
    assert dimension_groups(META, "dp_cp")[0] == [0, 2, 8, 10, 16, 18, 24, 26]
    assert dimension_groups(META, "tp_cp")[:2] == [[0, 1, 2, 3], [4, 5, 6, 7]]


@pytest.mark.parametrize("dim", ["tp", "cp", "dp", "ep", "pp", "dp_cp", "tp_cp"])
def test_meta_order_partitions_the_ranks(dim: str) -> None:
    groups = dimension_groups(META, dim)  # type: ignore[arg-type]
    assert sorted(r for g in groups for r in g) == list(range(32))
    assert all(len(g) == len(groups[0]) for g in groups)


def test_order_must_be_a_permutation() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="order"):
        Parallel.of(order="tp-dp-pp")


def test_meta_order_keeps_llama3_pipeline_hand_offs_inside_a_pod() -> None:
    # Llama 3 405B on 16k GPUs, 3,072-GPU pods: Megatron's order puts stage i and i+1 1,024 ranks
    # (128 nodes) apart, so most hand-offs leave the pod; Meta's keeps a pipeline on 16 neighbouring nodes.
    mega = Parallel.of(tp=8, pp=16, dp=128)
    meta = Parallel.of(tp=8, pp=16, dp=128, order="tp-cp-pp-dp")
    pod = 3072

    def crossings(p: Parallel) -> int:
        return sum(1 for g in dimension_groups(p, "pp") for a, b in itertools.pairwise(g) if a // pod != b // pod)

    assert crossings(meta) < crossings(mega) / 10
