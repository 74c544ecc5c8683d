"""`slowlink.trace` against Holistic Trace Analysis on public GPU traces: every per-rank number within 1% of HTA's
(recorded once with HTA, version in tests/data/traces/hta_reference.json; and live when HTA is installed), the
collectives' sizes and busbw by nccl-tests' definitions, and CPU (gloo) traces."""

from __future__ import annotations

import importlib.util
import json
import logging
import shutil
from pathlib import Path

import pytest

from slowlink.collectives.ops import busbw_factor
from slowlink.trace.collect import CollectiveCall
from slowlink.trace.kineto import collective_stats, read_kineto
from slowlink.trace.result import TraceRank

DATA = Path(__file__).parents[1] / "data" / "traces"
REFERENCE = json.loads((DATA / "hta_reference.json").read_text())
FIELDS = ("kernel_s", "idle_s", "compute_s", "communication_s", "memory_s", "comm_comp_overlap")
GLOO = [DATA / "gloo-ddp-rank-0.json.gz", DATA / "gloo-ddp-rank-1.json.gz"]


def _close(ours: TraceRank, hta: dict[str, float], field: str) -> None:
    # HTA prints the overlap as a percentage rounded to 2 decimals: 0.005 points of it is rounding, not a difference
    slack = 5e-5 if field == "comm_comp_overlap" else 0.0
    assert getattr(ours, field) == pytest.approx(hta[field], rel=0.01, abs=slack), (field, ours, hta)


@pytest.mark.parametrize("name", sorted(REFERENCE["traces"]))
def test_each_rank_number_is_htas_within_1pct(name: str) -> None:
    (rank,) = read_kineto([DATA / name]).ranks
    for field in FIELDS:
        _close(rank, REFERENCE["traces"][name], field)


def test_two_ranks_of_one_job_read_together() -> None:
    s = read_kineto([DATA / "hta-vit-rank-0.json.gz", DATA / "hta-vit-rank-1.json.gz"])
    assert [r.rank for r in s.ranks] == [0, 1] and s.world_size == 128 and s.backend == "nccl"
    assert all(r.steps == 2 and r.window_steps == 1 for r in s.ranks)
    assert s.ranks[0].step_mean_s == pytest.approx((607312 + 622928) / 2 * 1e-6)


def test_streams_busy_time() -> None:
    (r,) = read_kineto([DATA / "hta-nccl-a100-rank-0.json.gz"]).ranks
    assert len(r.streams) >= 2  # compute on the default stream, NCCL on its own
    assert max(r.streams.values()) <= r.kernel_s - r.idle_s + 1e-9 <= sum(r.streams.values()) + 1e-9


def test_collectives_carry_sizes_and_nccl_tests_busbw() -> None:
    s = read_kineto([DATA / "hta-nccl-a100-rank-0.json.gz"])
    ar = [c for c in s.collectives if c.op == "all_reduce"]
    assert ar and all(c.group_size == 2 and c.dtype == "Float" for c in ar)
    # the trace's 'In msg nelems' 2049000 floats is one all_reduce buffer (nccl-tests' size)
    assert any(c.size_bytes == 2049000 * 4 for c in ar)
    for c in s.collectives:
        assert c.size_bytes is not None and c.busbw_bytes_s is not None
        assert c.busbw_bytes_s == pytest.approx(c.size_bytes / c.time_s * busbw_factor(c.op, 2))
    assert sum(c.calls for c in s.collectives) == 14  # HTA's window: the NCCL kernels of the first two steps


def test_old_traces_name_the_op_from_the_kernel_and_leave_the_size_unknown() -> None:
    s = read_kineto([DATA / "hta-vit-rank-0.json.gz"])
    assert [(c.op, c.size_bytes, c.busbw_bytes_s) for c in s.collectives] == [("send_recv", None, None)]


def test_a_gloo_run_is_read_from_its_cpu_collectives() -> None:
    s = read_kineto(GLOO)
    assert s.backend == "gloo" and [r.device for r in s.ranks] == ["cpu", "cpu"]
    for r in s.ranks:
        assert r.steps == 3 and r.communication_s > 0 and r.compute_s > 0 and 0 < r.comm_comp_overlap < 1
        busy = r.compute_s + r.communication_s - r.comm_comp_overlap * r.communication_s
        assert r.idle_s == pytest.approx(r.kernel_s - busy, abs=1e-9)
    ar = [c for c in s.collectives if c.op == "all_reduce"]
    assert {c.size_bytes for c in ar} == {262400 * 4, 263168 * 4} and all(c.calls == 6 for c in ar)


def test_a_collectives_transfer_is_its_last_arrivals_duration() -> None:
    """The k-th call of a group on each rank is one collective; the shortest of its durations (the rank that
    arrived last waited for nobody) is its transfer; with one rank's calls there is none to compare."""
    def call(ts: float, dur: float) -> CollectiveCall:
        return CollectiveCall("all_reduce", 1000, None, "float", 2, "0", ts, dur)

    r0, r1 = [call(0, 10), call(100, 30)], [call(5, 20), call(125, 5)]
    (st,) = collective_stats([r0, r1], 2)
    assert st.transfer_time_s == pytest.approx((10 + 5) / 2 * 1e-6)
    assert st.time_s == pytest.approx(65 / 4 * 1e-6) and st.min_time_s == pytest.approx(5e-6)
    assert collective_stats([r0], 2)[0].transfer_time_s is None
    assert collective_stats([r0, r1[:1]], 2)[0].transfer_time_s is None  # calls that cannot be matched
    for c in read_kineto(GLOO).collectives:
        assert c.transfer_time_s is not None and c.min_time_s <= c.transfer_time_s <= c.time_s
        assert "transfer_time_s" in c.to_json()
    assert all(c.transfer_time_s is None for c in read_kineto(GLOO[:1]).collectives)


def test_a_directory_is_its_traces(tmp_path: Path) -> None:
    for p in GLOO:
        shutil.copy(p, tmp_path)
    def numbers(paths: list[Path]) -> list[dict[str, object]]:
        return [{k: v for k, v in r.to_json().items() if k != "file"} for r in read_kineto(paths).ranks]

    assert numbers([tmp_path]) == numbers(GLOO)


@pytest.mark.skipif(importlib.util.find_spec("hta") is None, reason="HolisticTraceAnalysis not installed "
                    "(pip install 'slowlink[trace]')")
@pytest.mark.parametrize("name", ["hta-nccl-a100-rank-0.json.gz", "hta-vit-rank-1.json.gz"])
def test_live_hta_agrees(name: str) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    from trace_hta_reference import hta_numbers

    logging.disable(logging.WARNING)
    (rank,) = read_kineto([DATA / name]).ranks
    hta = hta_numbers(DATA / name)
    for field in FIELDS:
        _close(rank, hta, field)


def test_computation_split_by_class() -> None:
    """The computation kernels by the classes bench train --profile uses: a CNN's (the HTA A100 trace: cuDNN
    convolutions as implicit GEMMs, batch norm, SGD) and a ROCm run's (Tensile GEMMs)."""
    (cnn,) = read_kineto([DATA / "hta-nccl-a100-rank-0.json.gz"]).ranks
    (rocm,) = read_kineto([DATA / "hta-mi250-rank-0.json.gz"]).ranks
    for r in (cnn, rocm):
        assert set(r.compute_classes) == {"gemm", "attention", "elementwise", "optimizer", "other"}
        assert sum(r.compute_classes.values()) >= r.compute_s * 0.999  # a sum: overlapping streams count twice
    assert cnn.compute_classes["gemm"] > 0 and cnn.compute_classes["optimizer"] > 0
    assert cnn.compute_classes["other"] < 0.1 * cnn.compute_s
    assert rocm.compute_classes["gemm"] > rocm.compute_classes["other"]


def test_self_times_subtract_direct_children() -> None:
    import numpy as np

    from slowlink.trace.kineto import self_times

    # linear [0, 10) holds addmm [1, 8), which holds a copy [2, 4); then a lone op [10, 12)
    ts, dur = np.array([0.0, 1.0, 2.0, 10.0]), np.array([10.0, 7.0, 2.0, 2.0])
    assert self_times(ts, dur).tolist() == [3.0, 5.0, 2.0, 2.0]


def test_a_cpu_trace_reports_its_gemm_shapes() -> None:
    """record_shapes' Input Dims per op, by self time: the classes add up to the compute thread's busy time, and
    the MLP's GEMMs are there with their shapes (bench train's model: hidden 256, ffn 1024, 64 tokens)."""
    (r, _) = read_kineto(GLOO).ranks
    assert sum(r.compute_classes.values()) == pytest.approx(r.compute_s, rel=0.01)
    for cls in ("gemm", "optimizer", "elementwise"):
        assert sum(x.time_s for x in r.shapes if x.cls == cls) == pytest.approx(r.compute_classes[cls], rel=0.05)
    gemms = {(x.op, json.dumps(x.dims)) for x in r.shapes if x.cls == "gemm"}
    assert ("aten::addmm", json.dumps([[1024], [64, 256], [256, 1024], [], []])) in gemms
    assert [x.time_s for x in r.shapes] == sorted((x.time_s for x in r.shapes), reverse=True)
    assert all(x.calls >= 1 and x.dtype for x in r.shapes)


def test_a_gpu_trace_links_kernels_to_their_ops_shapes() -> None:
    """Each kernel's External id names the op that launched it: on the MI250 trace every GEMM kernel is linked
    to its aten::addmm/aten::mm and their dims; the old ViT trace's kernels carry no op's id, so no shape."""
    (r,) = read_kineto([DATA / "hta-mi250-rank-0.json.gz"]).ranks
    gemm = [x for x in r.shapes if x.cls == "gemm"]
    assert {x.op for x in gemm} >= {"aten::addmm", "aten::mm"}
    assert sum(x.time_s for x in gemm) == pytest.approx(r.compute_classes["gemm"])
    assert next(x for x in gemm if x.op == "aten::addmm").dims == [[128], [5, 128], [128, 128], [], []]
    assert read_kineto([DATA / "hta-vit-rank-0.json.gz"]).ranks[0].shapes == ()
