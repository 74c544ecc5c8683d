"""Collective sweeps on 2 gloo ranks: every op correct, wrong reductions caught, dead ranks named."""

import time

import pytest

from slowlink.bench.collectives import BenchConfig, redops_for, total_wrong
from slowlink.bench.launch import MONITOR_INTERVAL_S, launch_local, peer_lost_grace_s
from slowlink.bench.record import CollectiveRow, CollectivesRecord, check_record
from slowlink.collectives.ops import busbw_factor
from slowlink.errors import BenchError

pytest.importorskip("torch")
TARGET = "slowlink.bench.collectives:sweep_rank"


def _run(cfg: BenchConfig, timeout_s: float = 120) -> list[CollectiveRow]:
    rec = check_record(list(launch_local(TARGET, cfg, 2, "gloo", timeout_s).rows), "sweep")
    assert isinstance(rec, CollectivesRecord)
    return rec.rows


def test_busbw_factors() -> None:
    assert busbw_factor("all_reduce", 4) == pytest.approx(1.5)
    assert busbw_factor("all_gather", 4) == pytest.approx(0.75)
    assert busbw_factor("send_recv", 4) == 1.0


def test_redops_all_without_nccl_has_no_avg() -> None:
    assert redops_for("all_reduce", "all", "gloo") == ("sum", "prod", "min", "max")
    assert redops_for("all_gather", "all", "gloo") == ("none",)
    with pytest.raises(BenchError, match=r"-o/--redop \(avg\) needs the nccl backend"):
        redops_for("all_reduce", "avg", "gloo")


@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                                "broadcast", "reduce", "send_recv"])
def test_every_op_is_correct_in_and_out_of_place(op: str) -> None:
    rows = _run(BenchConfig(op=op, sizes_bytes=(4096.0,), iters=1, warmup_iters=0, redop="all", dtype="half"))
    assert total_wrong(rows) == 0
    assert all(r.ranks == 2 and r.time_s > 0 for r in rows)
    assert (rows[0].in_place is None) == (op in ("all_to_all", "send_recv"))


def test_wrong_reduction_is_caught() -> None:
    rows = _run(BenchConfig(op="all_reduce", sizes_bytes=(4096.0,), iters=1, warmup_iters=0, fault="wrong_redop"))
    assert rows[0].wrong > 0 and rows[0].in_place is not None and rows[0].in_place.wrong > 0


def test_killed_rank_is_named() -> None:
    # SIGKILL mid-sweep (what the OOM killer or a node failure does): the launcher stops rank 0 and names rank 1.
    with pytest.raises(BenchError, match="rank 1 was killed by signal 9"):
        _run(BenchConfig(op="all_reduce", sizes_bytes=(4096.0, 8192.0), iters=1, warmup_iters=0, die_rank=1,
                         die_how="kill"), timeout_s=60)


def test_a_rank_that_lost_its_peer_fails_after_the_killed_one_is_seen() -> None:
    # torch's agent records one failure per poll, the first dead worker in its list: the survivor of a killed
    # peer must outlive a few polls so that the killed rank is named. Decided by the error's type (torch raises
    # every transport failure as a RuntimeError), never by its text.
    lost = RuntimeError("[gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:55530: Connection reset by peer")
    assert peer_lost_grace_s(lost) >= 3 * MONITOR_INTERVAL_S
    assert peer_lost_grace_s(RuntimeError("anything torch says")) == peer_lost_grace_s(lost)
    assert peer_lost_grace_s(BenchError("Connection reset by peer")) == 0.0  # our own error: this rank's cause


def test_a_stopped_rank_is_named_within_its_timeout() -> None:
    # SIGSTOP freezes rank 1 and its watchdog; rank 0 times out in the next all_reduce. The launcher must name
    # rank 1, not rank 0, and end the run at the timeout, not 30 s later (torch's agent waits that long for a
    # stopped rank to obey SIGTERM).
    start = time.monotonic()
    with pytest.raises(BenchError, match=r"rank 1 was stopped \(process \d+ in state T"):
        _run(BenchConfig(op="all_reduce", sizes_bytes=(4096.0, 8192.0), iters=1, warmup_iters=0, die_rank=1,
                         die_how="stop"), timeout_s=10)
    assert time.monotonic() - start < 10 + 12  # the timeout, plus start-up (spawn, torch import) and teardown


@pytest.mark.slow
def test_hung_rank_ends_the_run_within_its_timeout() -> None:
    # Rank 1 stops answering after the first size; rank 0 waits in the next all_reduce. The watchdogs end
    # the run at the timeout instead of letting it hang, and the message says which rank timed out.
    start = time.monotonic()
    with pytest.raises(BenchError, match=r"rank [01] did not finish within its timeout \(20 s\)"):
        _run(BenchConfig(op="all_reduce", sizes_bytes=(4096.0, 8192.0), iters=1, warmup_iters=0, die_rank=1,
                         die_how="hang"), timeout_s=20)
    assert time.monotonic() - start < 20 + 30  # the timeout, plus start-up and teardown


def test_dead_rank_is_named() -> None:
    with pytest.raises(BenchError, match="rank 1 died with exit code 3"):
        _run(BenchConfig(op="all_reduce", sizes_bytes=(4096.0, 8192.0), iters=1, warmup_iters=0, die_rank=1),
             timeout_s=60)


def test_every_rank_keeps_its_own_time_and_the_delayed_rank_waits_least() -> None:
    # Rank 1 sleeps 3 ms before every timed call (the test hook): it arrives late, the others wait for it,
    # so it spends ~3 ms less per call inside the collective; find-slow names it from the record.
    from slowlink.probe.find import record_suspects

    cfg = BenchConfig(op="all_reduce", sizes_bytes=(4096.0, 65536.0), iters=6, warmup_iters=1, rounds=2,
                      check=False, test_delay_rank=1, test_delay_s=3e-3)
    res = launch_local(TARGET, cfg, 3, "gloo", 60)
    for r in res.rows:
        assert len(r["rank_time_s"]) == len(r["rank_wait_s"]) == 3 and len(r["in_place"]["rank_wait_s"]) == 3
        assert r["time_s"] == max(r["rank_time_s"])
        assert min(r["rank_wait_s"]) == r["rank_wait_s"][1] < max(r["rank_wait_s"]) - 2e-3
    rec = check_record({"kind": "collectives", "env": {"hostnames": res.hostnames}, "rows": res.rows}, "sweep")
    found = sorted(record_suspects(rec), key=lambda s: -s.slowdown)
    assert found[0].id == "rank 1" and all(s.slowdown < found[0].slowdown / 2 for s in found[1:])


def test_delay_hook_on_a_rank_outside_the_job_is_refused() -> None:
    with pytest.raises(BenchError, match=r"SLOWLINK_BENCH_TEST_DELAY \(2\) must be a rank of the job \(< 2\)"):
        _run(BenchConfig(op="all_reduce", sizes_bytes=(4096.0,), iters=1, warmup_iters=0, test_delay_rank=2,
                         test_delay_s=1e-3), timeout_s=60)
