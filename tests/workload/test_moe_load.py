"""workload.moe.expert_load: the most loaded expert-parallel rank's routed rows over the mean, from a dropless
imbalance or Megatron-Core's capacity factor (with or without padding), in the all-to-all, the expert GEMMs and
the expert activations; 1.0 (today's numbers) unless the workload says otherwise."""

from __future__ import annotations

from typing import Any

import pytest

from slowlink.errors import SpecError
from slowlink.spec.workload import Workload, workload_from_mapping
from slowlink.workload.compute import layer_gemms
from slowlink.workload.moe import expert_activation_bytes, expert_load, routed_bytes

# Mixtral 8x7B's shape (h 4096, 8 experts, top 2, expert ffn 14336), seq 4096
MIXTRAL = {"preset": "mixtral-8x7b", "seq_len": 4096}


def _w(model: dict[str, Any] | None = None, dp: int = 8, **training: Any) -> Workload:
    return workload_from_mapping({"model": model or MIXTRAL,
                                  "training": {"global_batch": 128, "micro_batch": 1, **training},
                                  "parallel": {"tp": 1, "pp": 1, "ep": 8, "dp": dp}}, "w.yaml")


@pytest.mark.parametrize(("training", "load"), [
    ({}, 1.0),                                                           # balanced, dropless (the default)
    ({"moe_imbalance": 1.3}, 1.3),                                       # dropless: the hot rank takes 30% more
    ({"moe_imbalance": 1.3, "moe_capacity_factor": 1.25}, 1.25),         # the rest dropped at capacity
    ({"moe_imbalance": 1.1, "moe_capacity_factor": 1.25}, 1.1),          # under capacity: nothing dropped
    ({"moe_capacity_factor": 1.25, "moe_pad_to_capacity": True}, 1.25),  # padded: every expert computes capacity
    ({"moe_capacity_factor": 1.0, "moe_pad_to_capacity": True}, 1.0),    # the dgxc Grok-1 recipe: as balanced
])
def test_expert_load(training: dict[str, Any], load: float) -> None:
    assert expert_load(_w(**training)) == load


def test_the_hot_rank_moves_and_computes_its_load() -> None:
    base, hot = _w(), _w(moe_imbalance=1.25)
    # 4096 local tokens x top 2 x h 4096 x 2 bytes = 67,108,864 bytes into the all-to-all, 1.25 x on the hot rank
    assert routed_bytes(base) == 4096 * 2 * 4096 * 2
    assert routed_bytes(hot) == pytest.approx(1.25 * routed_bytes(base))
    # one local expert (8 experts / ep 8) of 4096 x 2 x 8 / 8 = 8192 rows, 10,240 on the hot rank
    expert_rows = [g.m for g in layer_gemms(hot) if g.k == 4096 and g.n == 2 * 14336]
    assert expert_rows == [8192 * 1.25]
    assert expert_activation_bytes(hot) > expert_activation_bytes(base)


def test_bad_moe_load_fields_are_refused() -> None:
    with pytest.raises(SpecError, match=r"training.moe_imbalance \(0.9\): Input should be greater than or equal to 1"):
        _w(moe_imbalance=0.9)
    with pytest.raises(SpecError, match=r"moe_pad_to_capacity \(true\) needs moe_capacity_factor"):
        _w(moe_pad_to_capacity=True)
    with pytest.raises(SpecError, match=r"training.moe_imbalance \(1.2\): model llama3-8b has no MoE layers"):
        _w({"preset": "llama3-8b"}, moe_imbalance=1.2)


def test_an_imbalanced_step_is_slower() -> None:
    from pathlib import Path

    from slowlink.spec.cluster import load_cluster
    from slowlink.workload.step import plan

    cluster = load_cluster(Path(__file__).resolve().parents[2] / "examples" / "ref-64gpu.yaml")
    base = plan(_w(dp=64), cluster, check_memory=False)
    hot = plan(_w(dp=64, moe_imbalance=1.25), cluster, check_memory=False)
    assert hot.comm_total_s["ep"] > base.comm_total_s["ep"] > 0.0
    assert hot.compute_s > base.compute_s and hot.step_time_s > base.step_time_s
