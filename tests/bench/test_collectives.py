import pytest

from slowlink.bench.collectives import BenchConfig, busbw_factor, launch_local
from slowlink.errors import BenchError

pytest.importorskip("torch")


def test_busbw_factors() -> None:
    assert busbw_factor("all_reduce", 4) == pytest.approx(1.5)
    assert busbw_factor("all_gather", 4) == pytest.approx(0.75)
    assert busbw_factor("send_recv", 4) == 1.0


@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                                "broadcast", "reduce", "send_recv"])
def test_every_op_is_correct(op: str) -> None:
    rows = launch_local(BenchConfig(op=op, sizes_bytes=(4096.0,), iters=1, warmup_iters=0), 2)
    assert rows[0]["wrong"] == 0 and rows[0]["ranks"] == 2 and rows[0]["time_s"] > 0


def test_wrong_reduction_is_caught() -> None:
    rows = launch_local(BenchConfig(op="all_reduce", sizes_bytes=(4096.0,), iters=1, warmup_iters=0,
                                    fault_rank=1), 2)
    assert rows[0]["wrong"] == 1


def test_dead_rank_is_named() -> None:
    with pytest.raises(BenchError, match="rank 1 died"):
        launch_local(BenchConfig(op="all_reduce", sizes_bytes=(4096.0, 8192.0), iters=1, warmup_iters=0,
                                 die_rank=1), 2, timeout_s=60)
