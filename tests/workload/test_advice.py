"""Advice fits the hardware (the NIC a host link can feed, no FP8 without FP8) and covers EP (issue 19)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from slowlink.catalog import load_catalog
from slowlink.spec.cluster import load_cluster
from slowlink.spec.workload import load_workload
from slowlink.workload.advice import advise, rdma_nic_gbit
from slowlink.workload.step import plan

EX = Path(__file__).parents[2] / "examples"


def _changes(cluster_file: str, workload_file: str, **gpu: str) -> list[str]:
    c = load_cluster(EX / cluster_file)
    if gpu:
        c = replace(c, gpu=load_catalog().gpu(gpu["gpu"]))
    w = load_workload(EX / workload_file)
    return [a.change for a in advise(w, c, plan(w, c))]


def test_the_suggested_nic_fits_the_host_link() -> None:
    h100 = load_cluster(EX / "ref-64gpu-25gbe.yaml")
    assert rdma_nic_gbit(h100) == 400  # PCIe Gen5 x16: 504 Gbit/s
    a100 = replace(h100, gpu=load_catalog().gpu("a100-80gb"))
    assert rdma_nic_gbit(a100) == 200  # PCIe Gen4 x16: 252 Gbit/s, too little for 400G
    assert any(c.startswith("an RDMA fabric: 200G") for c in _changes("ref-64gpu-25gbe.yaml", "llama3-8b.yaml",
                                                                       gpu="a100-80gb"))


def test_no_fp8_advice_on_a_gpu_without_fp8() -> None:
    assert any("FP8" in c for c in _changes("ref-64gpu.yaml", "mixtral-8x7b.yaml"))
    assert not any("FP8" in c for c in _changes("ref-64gpu.yaml", "mixtral-8x7b.yaml", gpu="a100-80gb"))


def test_expert_parallelism_across_nodes_is_advised_back_into_the_nvlink_domain() -> None:
    c = load_cluster(EX / "ref-64gpu.yaml")
    w = load_workload(EX / "mixtral-8x7b.yaml")  # tp 2 x ep 8 = 16 GPUs: EP's all_to_all crosses nodes
    base = plan(w, c)
    ep = [a for a in advise(w, c, base) if a.change.startswith("keep EP in the NVLink domain")]
    assert ep and "ep 4" in ep[0].change and ep[0].step_time_s < base.step_time_s


def test_tp_overlap_is_advised_with_the_sequence_parallelism_it_needs() -> None:
    """TE's userbuffers overlap hides TP only under SP (workload.tp_overlap): without SP the advice turns both on,
    and the re-run it quotes is the plan with both."""
    c = load_cluster(EX / "ref-64gpu.yaml")
    w = load_workload(EX / "llama3-70b.yaml")
    no_sp = replace(w, parallel=replace(w.parallel, **{"sequence_parallel": False}))
    base = plan(no_sp, c, check_memory=False)  # without SP its activations do not fit: the timing is the point
    tp = [a for a in advise(no_sp, c, base, check_memory=False) if "overlap TP collectives" in a.change]
    assert tp and "parallel.sequence_parallel: true" in tp[0].change and "overlap.tp_comm: true" in tp[0].change
    both = replace(no_sp, parallel=replace(no_sp.parallel, **{"sequence_parallel": True}),
                   overlap=replace(no_sp.overlap, **{"tp_comm": True}))
    assert tp[0].step_time_s == plan(both, c, check_memory=False).step_time_s < base.step_time_s
