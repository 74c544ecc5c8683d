"""parallel.pp_schedule: zero-bubble (ZB-H1) and DualPipe bubbles as DeepSeek-V3's Table 2 gives them over 1F1B's,
DualPipe's two stages a rank in memory, and the layouts and stacks that refuse them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slowlink.errors import InfeasiblePlan, SpecError
from slowlink.spec.cluster import load_cluster
from slowlink.spec.workload import Workload, workload_from_mapping
from slowlink.workload.compute import layer_parts
from slowlink.workload.memory import memory
from slowlink.workload.schedule import bubble_ratio
from slowlink.workload.step import plan

CLUSTER = load_cluster(Path(__file__).resolve().parents[2] / "examples" / "ref-64gpu.yaml")
DUAL = {"name": "torchtitan", "pipeline_schedules": ["1f1b", "dualpipe"]}


def test_bubble_ratio_by_hand() -> None:
    # F 1, B 2 (W 1 of it), PP 4: 1F1B 3 x 3 = 9; ZB-H1 3 x (1 + 2 - 2) = 3; DualPipe (4/2 - 1)(1 + 2 x 2 - 3) = 2
    assert bubble_ratio("1f1b", 4, 1.0, 2.0, 1.0) == 1.0
    assert bubble_ratio("zero-bubble", 4, 1.0, 2.0, 1.0) == pytest.approx(3 / 9)
    assert bubble_ratio("dualpipe", 4, 1.0, 2.0, 1.0) == pytest.approx(2 / 9)
    # Qi et al.'s T_F = T_B = T_W (B = T_B + T_W = 2): ZB-H1 is a third of 1F1B's bubble
    assert bubble_ratio("zero-bubble", 8, 1.0, 2.0, 1.0) == pytest.approx(1 / 3)


def _w(schedule: str, stack: object = "torchtitan", global_batch: int = 64, pp: int = 4, **parallel: Any) -> Workload:
    return workload_from_mapping({"model": {"preset": "llama3-8b"},
                                  "training": {"global_batch": global_batch, "micro_batch": 1},
                                  "parallel": {"tp": 1, "pp": pp, "dp": 64 // pp, "zero": 1,
                                               "pp_schedule": schedule, **parallel},
                                  "stack": stack}, "w.yaml")


def test_zero_bubble_shrinks_the_1f1b_bubble_by_its_ratio() -> None:
    base, zb = plan(_w("1f1b"), CLUSTER, check_memory=False), plan(_w("zero-bubble"), CLUSTER, check_memory=False)
    lp = layer_parts(_w("zero-bubble"), CLUSTER.gpu)
    f, b = lp.forward_s, lp.backward_s
    ratio = bubble_ratio("zero-bubble", 4, f / (f + b), b / (f + b), lp.gemm_bwd_s / 2.0 / (f + b))
    assert 0.0 < ratio < 1.0
    assert zb.bubble_s == pytest.approx(base.bubble_s * ratio, rel=1e-9)
    assert zb.step_time_s == pytest.approx(base.step_time_s - base.bubble_s + zb.bubble_s, rel=1e-9)
    assert zb.memory.total_bytes == base.memory.total_bytes  # ZB-H1 keeps 1F1B's activations


def test_dualpipe_holds_two_stages_and_one_more_micro_batch() -> None:
    base, dual = memory(_w("1f1b", DUAL)), memory(_w("dualpipe", DUAL))
    assert dual.weights_bytes == pytest.approx(2 * base.weights_bytes)
    assert dual.optimizer_bytes == pytest.approx(2 * base.optimizer_bytes)
    assert dual.activations_bytes == pytest.approx(base.activations_bytes * 5 / 4)
    assert plan(_w("dualpipe", DUAL), CLUSTER, check_memory=False).bubble_s < plan(
        _w("1f1b", DUAL), CLUSTER, check_memory=False).bubble_s


@pytest.mark.parametrize(("schedule", "stack", "parallel", "message"), [
    ("zero-bubble", "megatron-core", {}, "parallel.pp_schedule (zero-bubble): stack megatron-core implements 1f1b, "
     "interleaved"),
    ("dualpipe", "torchtitan", {}, "parallel.pp_schedule (dualpipe): stack torchtitan implements"),
    ("dualpipe", DUAL, {"pp": 1}, "pp_schedule (dualpipe) needs pp > 1 (not 1)"),
    ("zero-bubble", "torchtitan", {"vp": 2}, "needs pp > 1 (not 4) and vp 1 (not 2)"),
])
def test_schedules_a_layout_or_stack_cannot_run_are_refused(schedule: str, stack: object, parallel: dict[str, int],
                                                             message: str) -> None:
    with pytest.raises(SpecError) as exc:
        _w(schedule, stack, **parallel)
    assert message in str(exc.value)


def test_dualpipe_needs_even_stages_and_micro_batches() -> None:
    with pytest.raises(SpecError, match=r"pp_schedule \(dualpipe\) needs an even pp, not 3"):
        workload_from_mapping({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 63},
                               "parallel": {"tp": 1, "pp": 3, "dp": 21, "pp_schedule": "dualpipe"},
                               "stack": DUAL}, "w.yaml")
    with pytest.raises(InfeasiblePlan, match=r"needs an even number of micro-batches per step, not 3") as exc:
        plan(_w("dualpipe", DUAL, global_batch=48), CLUSTER, check_memory=False)
    assert exc.value.rule == "dualpipe_even_micro_batches"
