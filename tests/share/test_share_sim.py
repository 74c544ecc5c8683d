"""The shared-cluster simulation: the deadlock of per-GPU allocation, gang scheduling's wait and
fragmentation (hand-computed), and invariants over every scheduler and slicing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from slowlink import units
from slowlink.share.jobs import Job, JobClass, synthetic_jobs
from slowlink.share.scenario import Shape, load_share
from slowlink.share.sim import simulate_policy, simulate_share
from slowlink.spec.share import Policy

EX = Path(__file__).parents[2] / "examples"
NODE = Shape(1, 8, "h100-sxm", 79.6 * units.GiB)


def _busy_node_then_two_trainers(arrival_b: float = 5.0) -> list[Job]:
    """Eight 1-GPU jobs finishing at 10, 20, ... 80 s; two 6-GPU training jobs arriving at 5 s."""
    jobs = [Job(f"b{i}", 0.0, 1, 10.0 * (i + 1), "data-processing") for i in range(8)]
    return [*jobs, Job("a", 5.0, 6, 600.0), Job("b", arrival_b, 6, 600.0)]


def test_per_gpu_allocation_deadlocks_two_distributed_jobs() -> None:
    res = simulate_policy(NODE, Policy(scheduler="per-gpu"), _busy_node_then_two_trainers())
    assert len(res.deadlocks) == 1
    d = res.deadlocks[0]
    assert d.time_s == pytest.approx(80.0)  # the last 1-GPU job frees the last GPU
    assert [(h.job, h.holds, h.needs) for h in d.cycle] == [("a", 4, 6), ("b", 4, 6)]
    assert d.describe() == "a (holds 4/6 GPUs) waits for b (holds 4/6 GPUs) waits for a"
    assert res.finished == 8
    # GPUs held by the stuck jobs: 1+2+...+7 GPUs for 10 s each, over the 80 s (from the first arrival) x 8 GPUs
    assert res.held_idle == pytest.approx(sum(10.0 * k for k in range(1, 8)) / (80.0 * 8))


def test_gang_scheduling_runs_them_one_after_the_other() -> None:
    res = simulate_policy(NODE, Policy(scheduler="gang"), _busy_node_then_two_trainers())
    assert res.deadlocks == ()
    assert res.finished == 10
    # a starts when 6 GPUs are free (t=60), b when a ends (660); makespan 1260 s
    assert res.makespan_s == pytest.approx(1260.0)
    assert res.mean_queue_s == pytest.approx((55.0 + 655.0) / 10)
    # free while someone waits: 10+20+30+40+50 GPU-s before 60 s, then 1 GPU 60-70... 2 GPUs 80-660
    assert res.fragmentation == pytest.approx((150.0 + 10.0 + 2 * 580.0) / (1260.0 * 8))


def test_per_gpu_without_contention_does_not_deadlock() -> None:
    """A job submitted earlier has all its pods ahead: b waits for a, no deadlock."""
    res = simulate_policy(NODE, Policy(scheduler="per-gpu"), _busy_node_then_two_trainers(arrival_b=6.0))
    assert res.deadlocks == ()
    assert res.finished == 10


def _stream(n: int = 300, seed: int = 3) -> list[Job]:
    classes = (JobClass("inference", 3, (1,), 900.0, 0.25, 10 * units.GiB),
               JobClass("training", 1, (1, 2, 4, 8, 16), 1800.0, 1.0, 60 * units.GiB))
    return synthetic_jobs(n, 120.0, classes, np.random.default_rng(seed))


@pytest.mark.parametrize(("scheduler", "slicing"), [("gang", "whole"), ("gang", "mig"), ("gang", "timeslice"),
                                                    ("per-gpu", "whole")])
def test_invariants_hold_under_every_policy(scheduler: str, slicing: str) -> None:
    shape = Shape(3, 8, "h100-sxm", 79.6 * units.GiB)
    jobs = _stream()
    res = simulate_policy(shape, Policy(scheduler=scheduler, slicing=slicing), jobs, 4, 0.76)  # type: ignore[arg-type]
    assert res.deadlocks == () or scheduler == "per-gpu"
    if not res.deadlocks:
        assert res.finished == len(jobs)
    assert 0 <= res.utilisation <= res.allocated + 1e-9 <= 1 + 1e-9
    assert 0 <= res.fragmentation <= 1 - res.allocated + 1e-9
    assert res.mean_queue_s >= 0 and res.p50_queue_s <= res.p95_queue_s <= res.p99_queue_s
    for k in res.by_kind:
        assert k.run_slowdown >= 1 - 1e-9
        assert k.jct_slowdown >= k.run_slowdown - 1e-9
        if slicing in ("whole", "mig") and k.kind == "training":
            assert k.run_slowdown == pytest.approx(1.0)  # whole GPUs: nobody shares them


def test_timeslicing_slows_training_and_mig_does_not() -> None:
    spec, jobs, shape = load_share(EX / "share-mig-mix.yaml")
    res = {p.slicing: p for p in simulate_share(spec, jobs, shape).policies}
    train = {s: next(k for k in r.by_kind if k.kind == "training") for s, r in res.items()}
    infer = {s: next(k for k in r.by_kind if k.kind == "inference") for s, r in res.items()}
    assert train["whole"].run_slowdown == pytest.approx(1.0)
    assert train["mig"].run_slowdown == pytest.approx(1.0)
    assert train["timeslice"].run_slowdown > 1.1
    # an inference server alone is never slowed; time-sliced with neighbours it gets 0.76 of its slice
    assert 1.0 < infer["timeslice"].run_slowdown <= 1 / 0.76 + 1e-9
    assert infer["mig"].run_slowdown == pytest.approx(1.0)  # 2g.20gb holds its quarter of the SMs
    assert res["mig"].utilisation > res["whole"].utilisation
    assert res["mig"].mean_queue_s < res["whole"].mean_queue_s


def test_a_distributed_time_sliced_job_runs_at_its_slowest_gpu() -> None:
    shape = Shape(1, 2, "h100-sxm", 79.6 * units.GiB)
    jobs = [Job("inf", 0.0, 1, 1000.0, "inference", 1.0), Job("train", 0.0, 2, 100.0)]
    res = simulate_policy(shape, Policy(scheduler="gang", slicing="timeslice"), jobs, 4, 0.5)
    train = next(k for k in res.by_kind if k.kind == "training")
    # on GPU 0 it shares with a job that wants the whole GPU: half of it, at efficiency 0.5 -> rate 0.25
    assert train.run_slowdown == pytest.approx(4.0)


def test_a_slice_smaller_than_the_compute_a_job_uses_stretches_it() -> None:
    jobs = [Job("inf", 0.0, 1, 100.0, "inference", 0.5, 5 * units.GiB, "1g.10gb")]
    res = simulate_policy(NODE, Policy(scheduler="gang", slicing="mig"), jobs)
    assert res.by_kind[0].run_slowdown == pytest.approx(0.5 / (1 / 7))


def test_reserved_shares_pack_a_gpu_and_run_at_full_speed() -> None:
    shape = Shape(1, 2, "h100-sxm", 79.6 * units.GiB)
    jobs = [Job(f"s{i}", 0.0, 1, 100.0, "inference", 0.5) for i in range(5)]
    res = simulate_policy(shape, Policy(scheduler="gang", slicing="timeslice"), jobs, 8, 0.76, reserve=True)
    # two halves per GPU: four run at once at full speed, the fifth waits for one of them
    assert res.by_kind[0].run_slowdown == pytest.approx(1.0)
    assert res.makespan_s == pytest.approx(200.0)
    assert res.mean_queue_s == pytest.approx(100.0 / 5)
    assert res.allocated_at_last_arrival == pytest.approx(1.0)


def test_two_jobs_on_one_nodes_nics_stretch_their_communication() -> None:
    """Three 8-GPU nodes, two 12-GPU jobs with 30% communication: packed, both drive the middle node's NICs
    (1 / (0.7 + 0.3 x 2) = 1/1.3 of full speed); on exclusive nodes the second waits for the first."""
    spec, jobs, shape = load_share(EX / "share-nic-isolation.yaml")
    shared, exclusive = simulate_share(spec, jobs, shape).policies
    assert shared.by_kind[0].run_slowdown == pytest.approx(1.3)
    assert shared.makespan_s == pytest.approx(1.3 * 3600)
    assert exclusive.by_kind[0].run_slowdown == pytest.approx(1.0)
    assert exclusive.makespan_s == pytest.approx(2 * 3600)
    assert exclusive.allocated == pytest.approx(16 / 24)  # two whole nodes, 4 of their GPUs idle
    assert exclusive.fragmentation == pytest.approx(8 * 3600 / (24 * 7200))


def test_a_single_node_job_uses_no_nic() -> None:
    jobs = [Job("a", 0.0, 4, 100.0, comm_fraction=0.5), Job("b", 0.0, 4, 100.0, comm_fraction=0.5)]
    res = simulate_policy(NODE, Policy(scheduler="gang"), jobs)
    assert res.by_kind[0].run_slowdown == pytest.approx(1.0)


def test_comm_fraction_from_the_step_models_plan(tmp_path: Path) -> None:
    """Llama 3 8B on 64 GPUs over 25GbE: DP's exposed all-reduce is most of the step (TP stays in the node)."""
    from slowlink.spec.cluster import load_cluster
    from slowlink.spec.workload import load_workload
    from slowlink.workload.step import plan

    cluster, workload = EX / "ref-64gpu-25gbe.yaml", EX / "llama3-8b.yaml"
    p = tmp_path / "s.yaml"
    p.write_text(f"cluster: {{nodes: 8}}\npolicies: [{{scheduler: gang}}]\njobs:\n"
                 f"  - {{gpus: 64, duration_s: 100, plan: {{cluster: {cluster}, workload: {workload}}}}}\n")
    _, jobs, _ = load_share(p)
    r = plan(load_workload(workload), load_cluster(cluster))
    assert not r.tp_spans_nodes
    assert jobs[0].comm_fraction == pytest.approx(sum(v for k, v in r.comm_s.items() if k != "tp") / r.step_time_s)
    assert 0.5 < jobs[0].comm_fraction < 0.7
