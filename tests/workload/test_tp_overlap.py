"""TP overlap as Transformer Engine v1.13's userbuffers schedules it (workload/tp_overlap.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from slowlink.catalog import load_catalog
from slowlink.catalog.tp_comm import DEFAULT, GemmOverlap, tp_comm_config
from slowlink.errors import SpecError
from slowlink.spec.cluster import load_cluster
from slowlink.spec.workload import Workload, load_workload
from slowlink.workload.comm import analytical_cost, groups_of
from slowlink.workload.compute import Gemm, gemm_time_s, layer_compute, wave_quantisation
from slowlink.workload.step import plan
from slowlink.workload.tp_overlap import (
    UB_STREAMS,
    bulk,
    chunk_time_s,
    math_gpu,
    pipeline_rs,
    ring_exchange_ag,
    tp_overlap,
)
from slowlink.workload.traffic import edge_tp

ROOT = Path(__file__).resolve().parents[2]
H100 = load_catalog([]).gpu("h100-sxm")
G = Gemm(8192, 8192, 8192)  # 8192 tokens: every chunk a whole number of 128-row tiles
PIPELINE_SPLITS = tp_comm_config(DEFAULT).gemms["proj_fprop"].num_splits or 0  # TE v1.13 default: 4


def _tp_comm(sp: bool = True, recompute: str = "selective", config: str = DEFAULT) -> Workload:
    w = load_workload(ROOT / "examples" / "llama3-8b.yaml")
    return replace(w, overlap=replace(w.overlap, **{"tp_comm": True, "grad_reduce": False,
                                                           "param_gather": False, "tp_comm_config": config}),
                   parallel=replace(w.parallel, **{"sequence_parallel": sp}),
                   training=replace(w.training, **{"recompute": recompute}))


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
    edge = edge_tp(w, cost, cluster.gpu)  # pp 1: the embedding's and the output layer's on the same stage
    assert r.comm_s["tp"] == pytest.approx(micro * (layers * ub.exposed_s + edge.embedding_s + edge.output_s))
    assert r.comm_total_s["tp"] == pytest.approx(micro * (layers * ub.total_s + edge.total_s))


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
    micro = w.training.global_batch // (w.training.micro_batch * w.parallel.dp)
    edge = edge_tp(w, analytical_cost(cluster), cluster.gpu)  # not userbuffers': the output layer's hides
    assert r.comm_s["tp"] - micro * (edge.embedding_s + edge.output_s) == pytest.approx(
        r.comm_total_s["tp"] - micro * edge.total_s)
    assert r.comm_s["tp"] > 0.0


def test_an_sm_margin_runs_the_gemm_on_the_sms_the_comm_leaves() -> None:
    # TE v1.13 CommOverlapCore: _math_sms = sm_count - num_comm_sm with set_sm_margin
    margin = GemmOverlap("pipeline", 24, True, 4, False)
    on = math_gpu(H100, margin)
    assert on.sms == H100.sms - 24
    assert on.peak("bf16") == pytest.approx(H100.peak("bf16") * (H100.sms - 24) / H100.sms)
    # fewer SMs: peak x 108/132, and the tiles fill 108-wide waves instead of 132-wide ones
    waves = wave_quantisation(G, H100.sms) / wave_quantisation(G, on.sms)
    assert gemm_time_s(G, on, "bf16") == pytest.approx(gemm_time_s(G, H100, "bf16") * H100.sms / on.sms * waves)
    assert gemm_time_s(G, on, "bf16") > 1.15 * gemm_time_s(G, H100, "bf16")
    assert math_gpu(H100, GemmOverlap("pipeline", 24, False, 4, False)) is H100
    with pytest.raises(SpecError, match=r"num_sm \(132\) with set_sm_margin must be < the SMs of gpu h100-sxm"):
        math_gpu(H100, GemmOverlap("bulk", 132, True, None, False))


def test_aggregate_exchanges_one_chunk_exposed_then_pairs() -> None:
    # TE split_overlap_ag, _aggregate: a 1x exchange, then tp/2 GEMMs of 2 chunks beside 2x exchanges but the last
    pair = chunk_time_s(G, 4, H100, "bf16")
    step = 0.1 * pair
    covered = ring_exchange_ag(G, 7 * step, 8, H100, "bf16", aggregate=True)
    assert covered.time_s == pytest.approx(step + 4 * pair)
    assert covered.comm_s == pytest.approx(7 * step)
    bound = ring_exchange_ag(G, 7 * 2.0 * pair, 8, H100, "bf16", aggregate=True)  # each 2x exchange 4 pairs long
    assert bound.time_s == pytest.approx(2.0 * pair + 3 * 4.0 * pair + pair)


def test_a_margin_gemm_pays_for_its_comm_sms_instead_of_contention() -> None:
    # dgxc 25.02 GPT-3 175B: proj/fc2_fprop pipeline with set_sm_margin (24 and 20 SMs)
    cluster = load_cluster(ROOT / "examples" / "ref-64gpu.yaml")
    cost = analytical_cost(cluster)
    te = tp_overlap(_tp_comm(), cost, cluster.gpu)
    dgxc = tp_overlap(_tp_comm(config="dgxc-25.02-gpt3-175b"), cost, cluster.gpu)
    assert dgxc.total_s == pytest.approx(te.total_s)  # the same collectives
    assert dgxc.hidden_s < te.hidden_s  # the pipeline RS no longer contends: its SMs are reserved
    assert dgxc.exposed_s > te.exposed_s  # the row GEMMs run on 108 and 112 of 132 SMs


def test_aggregate_needs_an_even_tp() -> None:
    w = _tp_comm(config="dgxc-25.02-llama31-405b")
    w = replace(w, parallel=replace(w.parallel, **{"tp": 3, "dp": 1}))
    cluster = load_cluster(ROOT / "examples" / "ref-64gpu.yaml")
    with pytest.raises(SpecError, match=r"gemms.qkv_fprop.aggregate needs an even parallel.tp \(3\)"):
        tp_overlap(w, analytical_cost(cluster), cluster.gpu)
