"""TP overlap as Transformer Engine v1.13's userbuffers schedules it (workload/tp_overlap.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from slowlink.catalog import load_catalog
from slowlink.spec.cluster import load_cluster
from slowlink.workload.comm import analytical_cost, groups_of
from slowlink.workload.compute import Gemm, gemm_time_s, layer_compute
from slowlink.workload.spec import Workload, load_workload
from slowlink.workload.step import plan
from slowlink.workload.tp_overlap import (
    PIPELINE_SPLITS,
    UB_STREAMS,
    bulk,
    chunk_time_s,
    pipeline_rs,
    ring_exchange_ag,
    tp_overlap,
)

ROOT = Path(__file__).resolve().parents[2]
H100 = load_catalog([]).gpu("h100-sxm")
G = Gemm(8192, 8192, 8192)  # 8192 tokens: every chunk a whole number of 128-row tiles


def _tp_comm(sp: bool = True, recompute: str = "selective") -> Workload:
    w = load_workload(ROOT / "examples" / "llama3-8b.yaml")
    return replace(w, overlap=w.overlap.model_copy(update={"tp_comm": True, "grad_reduce": False,
                                                           "param_gather": False}),
                   parallel=w.parallel.model_copy(update={"sequence_parallel": sp}),
                   training=w.training.model_copy(update={"recompute": recompute}))


def test_chunks_share_the_sms_three_at_a_time() -> None:
    one = chunk_time_s(G, 8, H100, "bf16")
    assert UB_STREAMS == 3
    assert one == pytest.approx(gemm_time_s(Gemm(8192 * 3 / 8, 8192, 8192), H100, "bf16") / 3)
    assert chunk_time_s(G, 2, H100, "bf16") == pytest.approx(gemm_time_s(G, H100, "bf16") / 2)


def test_pipeline_reduce_scatter_leaves_the_last_chunk_exposed() -> None:
    c = chunk_time_s(G, PIPELINE_SPLITS, H100, "bf16")
    fast = pipeline_rs(G, 0.1 * c, PIPELINE_SPLITS, H100, "bf16")  # each RS chunk hides behind the next GEMM
    assert fast.time_s == pytest.approx(PIPELINE_SPLITS * c + 0.1 * c)
    slow = pipeline_rs(G, 2.0 * c, PIPELINE_SPLITS, H100, "bf16")  # RS-bound: the chunks queue on the comm stream
    assert slow.time_s == pytest.approx(c + PIPELINE_SPLITS * 2.0 * c)
    assert slow.comm_s == pytest.approx(PIPELINE_SPLITS * 2.0 * c)


def test_ring_exchange_pays_the_steps_no_chunk_covers() -> None:
    c = chunk_time_s(G, 8, H100, "bf16")
    covered = ring_exchange_ag(G, 7 * 0.5 * c, 8, H100, "bf16")
    assert covered.time_s == pytest.approx(8 * c)
    bound = ring_exchange_ag(G, 7 * 3.0 * c, 8, H100, "bf16")  # each step 3x a chunk: 7 steps + the last chunk
    assert bound.time_s == pytest.approx(7 * 3.0 * c + c)


def test_bulk_hides_what_fits_beside_the_whole_gemm() -> None:
    t = gemm_time_s(G, H100, "bf16")
    assert bulk(G, 0.5 * t, H100, "bf16").time_s == pytest.approx(t)
    assert bulk(G, 1.5 * t, H100, "bf16").time_s == pytest.approx(1.5 * t)


def test_overlap_leaves_tp_exposed_even_when_the_layer_outlasts_it() -> None:
    # the old rule hid all of it (max(0, TP - layer compute) = 0); TE's windows leave the last RS chunk, the
    # uncovered ring steps and the split GEMMs' cost
    w = _tp_comm()
    cluster = load_cluster(ROOT / "examples" / "ref-64gpu.yaml")
    cost = analytical_cost(cluster)
    ub = tp_overlap(w, cost, cluster.gpu)
    assert ub.total_s < layer_compute(w, cluster.gpu).total_s
    assert 0.0 < ub.exposed_s < ub.total_s
    r = plan(w, cluster)
    micro = w.training.global_batch // (w.training.micro_batch * w.parallel.dp)
    layers = w.model.layers
    assert r.comm_s["tp"] == pytest.approx(micro * layers * ub.exposed_s)
    assert r.comm_total_s["tp"] == pytest.approx(micro * layers * ub.total_s)


def test_every_collective_of_the_block_is_priced_once_per_pass() -> None:
    # per block, forward: AG (ring) + 4 RS chunks (pipeline); backward: AG of the output gradient (ring),
    # AG of the input for the weight gradient and RS of the data gradient (bulk); full recompute: forward twice
    w = _tp_comm()
    cluster = load_cluster(ROOT / "examples" / "ref-64gpu.yaml")
    cost = analytical_cost(cluster)
    grp = groups_of(w.parallel, "tp")
    size = w.training.micro_batch * w.model.seq_len * w.model.hidden * 2.0
    ag, rs = cost("all_gather", size, grp), cost("reduce_scatter", size, grp)
    fwd = ag + PIPELINE_SPLITS * cost("reduce_scatter", size / PIPELINE_SPLITS, grp)
    assert tp_overlap(w, cost, cluster.gpu).total_s == pytest.approx(2 * (fwd + 2 * ag + rs))
    full = tp_overlap(_tp_comm(recompute="full"), cost, cluster.gpu)
    assert full.total_s == pytest.approx(2 * (2 * fwd + 2 * ag + rs))
    assert full.exposed_s > tp_overlap(w, cost, cluster.gpu).exposed_s


def test_without_sequence_parallelism_tp_overlap_hides_nothing() -> None:
    # Megatron-Core asserts SP for tp_comm_overlap (core_r0.10.0 arguments.py); userbuffers never runs
    w = _tp_comm(sp=False)
    cluster = load_cluster(ROOT / "examples" / "ref-64gpu.yaml")
    r = plan(w, cluster)
    assert r.comm_s["tp"] == pytest.approx(r.comm_total_s["tp"])
    assert r.comm_s["tp"] > 0.0
