"""The input embedding's dense weight gradient (PyTorch embedding_dense_backward + Megatron's main_grad add), charged
on the first pipeline stage every micro-batch."""

from __future__ import annotations

from pathlib import Path

import pytest

from slowlink.spec.cluster import Cluster, load_cluster
from slowlink.spec.workload import Workload, workload_from_mapping
from slowlink.workload.compute import layer_compute, logits_compute_s
from slowlink.workload.embedding import embedding_grad_bytes
from slowlink.workload.step import fit_dp, plan, stage_time_s

EX = Path(__file__).parents[2] / "examples"


def _w(pp: int, tp: int = 2, precision: str = "bf16") -> Workload:
    return workload_from_mapping({
        "model": {"preset": "llama3-8b"},
        "training": {"global_batch": 64, "micro_batch": 1, "precision": precision},
        "parallel": {"tp": tp, "pp": pp, "dp": 2}}, "w.yaml")


def test_the_dense_gradient_of_the_whole_table_is_written_every_micro_batch() -> None:
    # Llama 3 8B: V 128256, h 4096; TP 2: 64128 rows. bf16: zero-fill 2 + read 2, the bf16 main_grad (reduced in
    # bf16) read 2 + write 2; fp32 training: 4 + 4 + 4 + 4.
    assert embedding_grad_bytes(_w(1)) == pytest.approx(128256 / 2 * 4096 * 8)
    assert embedding_grad_bytes(_w(1, precision="fp32")) == pytest.approx(128256 / 2 * 4096 * 16)


def test_one_stage_holds_embedding_and_logits_several_stages_split_them() -> None:
    assert stage_time_s(_w(1), (10.0, 10.0, 10.0), 1.0, 2.0) == 13.0
    assert stage_time_s(_w(2), (10.0, 10.0, 10.0), 1.0, 2.0) == 12.0
    assert stage_time_s(_w(2), (10.0, 10.0, 10.0), 3.0, 2.0) == 13.0


def test_the_step_pays_it_once_per_micro_batch() -> None:
    c = load_cluster(EX / "ref-64gpu.yaml")
    w = workload_from_mapping({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 512, "micro_batch": 1},
                               "parallel": {"tp": 2, "pp": 1, "dp": "auto"}}, "w.yaml")
    r = plan(w, c)
    micro = w.training.global_batch // (w.training.micro_batch * r_dp(w, c))
    layers = w.model.layers * layer_compute(w, c.gpu).total_s
    emb = embedding_grad_bytes(w) / c.gpu.hbm_bw_bytes_s
    assert r.compute_s == pytest.approx(micro * (layers + emb + logits_compute_s(w, c.gpu)))


def r_dp(w: Workload, c: Cluster) -> int:
    return fit_dp(w, c).parallel.dp
