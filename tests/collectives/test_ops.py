"""nccl-tests busbw factors (doc/PERFORMANCE.md) and NCCL ring step counts."""

from __future__ import annotations

import pytest

from slowlink.collectives.ops import OPS, busbw_factor, check_op, inter_steps, ring_steps
from slowlink.errors import SpecError


@pytest.mark.parametrize(("op", "n", "factor"), [
    ("all_reduce", 8, 2 * 7 / 8), ("all_gather", 8, 7 / 8), ("reduce_scatter", 16, 15 / 16),
    ("all_to_all", 4, 3 / 4), ("broadcast", 8, 1.0), ("reduce", 8, 1.0), ("send_recv", 2, 1.0),
])
def test_busbw_factor_matches_nccl_tests(op: str, n: int, factor: float) -> None:
    assert busbw_factor(op, n) == pytest.approx(factor)


def test_ring_steps() -> None:
    assert ring_steps("all_reduce", 8) == 14
    assert ring_steps("all_gather", 8) == 7
    assert inter_steps("all_reduce", 4) == 6
    assert inter_steps("all_gather", 1) == 0


def test_unknown_op_names_the_known_ones() -> None:
    with pytest.raises(SpecError, match=r"op \('allreduce'\).*all_reduce"):
        check_op("allreduce")
    assert len(OPS) == 7
