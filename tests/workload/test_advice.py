"""Advice fits the hardware (the NIC a host link can feed, no FP8 without FP8) and covers EP (issue 19)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from slowlink.catalog import load_catalog
from slowlink.spec.cluster import Cluster, load_cluster
from slowlink.spec.workload import Workload, load_workload, workload_from_mapping
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


def test_advice_follows_the_bottleneck_a_pipeline_bubble_gets_virtual_stages_first() -> None:
    """A bubble-bound plan was followed by TP-overlap advice and no word of virtual stages (issue 39): advice that
    answers the stated bottleneck comes first, each re-run by the model."""
    c = load_cluster(EX / "ref-64gpu.yaml")
    w = load_workload(EX / "llama3-70b.yaml")
    w = replace(w, training=replace(w.training, global_batch=8), parallel=replace(w.parallel, vp=1))
    base = plan(w, c)
    assert base.bottleneck_dim == "pp_bubble"
    adv = advise(w, c, base)
    assert adv[0].answers == "pp_bubble" and "parallel.vp: 2" in adv[0].change
    assert plan(replace(w, parallel=replace(w.parallel, vp=2)), c).step_time_s == adv[0].step_time_s
    firsts = [a.answers == "pp_bubble" for a in adv]
    assert firsts == sorted(firsts, reverse=True)  # every bubble answer before the others
    assert all(a.base_s == base.step_time_s and not a.with_storage for a in adv)


def test_a_storage_bound_step_is_advised_on_its_storage() -> None:
    """Data stall and sync checkpoints: the step with its storage is what the advice shortens; a faster GEMM does
    not shorten a step that waits on storage, so it is not advice."""
    from slowlink.storage.plan import plan_storage
    from slowlink.workload.step import fit_dp

    c = load_cluster(EX / "ref-64gpu-nfs.yaml")
    w = fit_dp(load_workload(EX / "video-8b-files.yaml"), c)
    base = plan(w, c)
    adv = advise(w, c, base, bottleneck="storage")
    assert [a.answers for a in adv][:1] == ["storage"] and "checkpoint.mode: async" in adv[0].change
    s = plan_storage(w, c, base)
    assert adv[0].base_s == s.run_step_s + (s.checkpoint_overhead_s or 0.0) and adv[0].with_storage


def test_the_tp_overlap_advice_reads_cleanly() -> None:
    """'(userbuffers), overlap.tp_comm: true)' had a stray parenthesis (issue 39)."""
    changes = _changes("ref-64gpu.yaml", "llama3-8b.yaml")
    tp = next(c for c in changes if c.startswith("overlap TP collectives"))
    assert tp == "overlap TP collectives with the GEMMs (userbuffers: overlap.tp_comm: true)"
    assert tp.count("(") == tp.count(")")


def test_a_faster_fabric_answers_a_communication_bottleneck() -> None:
    """On 25GbE the DP reduction over the NIC is the bottleneck: the RDMA fabric (60% faster) answers it, ahead of
    FP8 gradients (16%), both before the advice that answers another wait."""
    changes = _changes("ref-64gpu-25gbe.yaml", "llama3-8b.yaml")
    assert changes[0].startswith("an RDMA fabric") and changes[1].startswith("FP8 gradient compression")


def _mixtral(**overlap: bool) -> tuple[Workload, Cluster]:
    c = load_cluster(EX / "ref-64gpu.yaml")
    w = workload_from_mapping({"model": {"preset": "mixtral-8x7b"}, "training": {"global_batch": 256},
                               "parallel": {"tp": 1, "pp": 4, "dp": 16, "ep": 8, "zero": 1},
                               "overlap": overlap}, "w.yaml")
    return w, c


def test_a_moe_step_is_advised_to_overlap_its_dispatch_and_the_advice_is_checked() -> None:
    w, c = _mixtral()
    base = plan(w, c, check_memory=False)
    advice = {a.change: a for a in advise(w, c, base, check_memory=False)}
    ep = [a for k, a in advice.items() if "overlap.ep_comm: true" in k]
    assert len(ep) == 1 and ep[0].answers == "ep"
    overlapped, _ = _mixtral(ep_comm=True)
    again = plan(overlapped, c, check_memory=False)
    assert ep[0].step_time_s == again.step_time_s < base.step_time_s
    assert again.comm_s["ep"] < base.comm_s["ep"]
    # the PP overlap needs the interleaved schedule: not offered at vp 1
    assert not any("overlap.pp_comm" in k for k in advice)


def test_a_bucketed_reduction_is_advised_one_bucket_size() -> None:
    c = load_cluster(EX / "ref-64gpu.yaml")
    w = workload_from_mapping({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 128},
                               "parallel": {"tp": 1, "pp": 1, "dp": 64, "zero": 1}}, "w.yaml")
    base = plan(w, c, check_memory=False)
    sizes = [a for a in advise(w, c, base, check_memory=False) if a.change.startswith("DP gradient buckets")]
    assert len(sizes) == 1 and sizes[0].answers == "dp"
    # Megatron-Core's max(40M, 1M x 64) = 64M now; 4x as large pays fewer calls' latency here
    assert "of 256M parameters instead of 64M" in sizes[0].change
    bigger = workload_from_mapping({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 128},
                                    "parallel": {"tp": 1, "pp": 1, "dp": 64, "zero": 1},
                                    "stack": {"name": "megatron-core", "grad_bucket_params": 2.56e8,
                                              "grad_bucket_params_per_dp": 0}}, "w.yaml")
    assert plan(bigger, c, check_memory=False).step_time_s == sizes[0].step_time_s < base.step_time_s
