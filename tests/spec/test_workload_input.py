"""Bad workload files: each a SpecError naming the file, the field, the value and the rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slowlink.errors import InfeasiblePlan, SpecError
from slowlink.spec.cluster import load_cluster
from slowlink.spec.workload import check_hardware, workload_from_mapping

EXAMPLES = Path(__file__).parents[2] / "examples"


def _wl(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"model": {"preset": "llama3-8b"}, "training": {"global_batch": 512},
                            "parallel": {"tp": 2, "dp": 32}}
    for key, value in over.items():
        base[key] = {**base.get(key, {}), **value}
    return base


@pytest.mark.parametrize(("over", "expected"), [
    ({"model": {"moe": {"experts": 4, "top_k": 8, "expert_ffn_hidden": 1024}}},
     r"w.yaml: model.moe: top_k \(8\) must be <= experts \(4\)"),
    ({"parallel": {"vp": 2}}, r"w.yaml: parallel: vp \(2\) > 1 needs pp > 1"),
    ({"model": {"seq_len": 8190}, "parallel": {"cp": 4, "dp": 8}},
     r"w.yaml: parallel.cp \(4\): model.seq_len \(8190\) must be a multiple of 2 \* cp \(8\)"),
    ({"parallel": {"tp": True}}, r"w.yaml: parallel.tp \(True\): must be an integer"),
    ({"training": {"global_batch": float("inf")}}, r"w.yaml: training.global_batch \(inf\)"),
    ({"training": {"cross_entropy": "apex"}},
     r"w.yaml: training.cross_entropy \('apex'\): .*'megatron', 'megatron_fused', 'fused' or 'gathered'"),
    ({"model": {"dropout": "yes"}}, r"w.yaml: model.dropout \('yes'\): must be true or false"),
    ({"model": {"dropout": 0.1}}, r"w.yaml: model.dropout \(0.1\): must be true or false"),
])
def test_bad_workloads(over: dict[str, Any], expected: str) -> None:
    with pytest.raises(SpecError, match=expected):
        workload_from_mapping(_wl(**over), "w.yaml")


def test_cp_that_divides_the_sequence_is_fine() -> None:
    w = workload_from_mapping(_wl(model={"seq_len": 8192}, parallel={"cp": 4, "dp": 8}), "w.yaml")
    assert w.parallel.cp == 4


def test_a_cluster_given_as_the_workload() -> None:
    from slowlink.fileio import read_mapping

    with pytest.raises(SpecError, match=r"c.yaml: this looks like a cluster file .* not a workload file"):
        workload_from_mapping(read_mapping(EXAMPLES / "ref-64gpu.yaml"), "c.yaml")


def test_fp8_on_a_gpu_without_fp8(tmp_path: Path) -> None:
    text = (EXAMPLES / "ref-64gpu.yaml").read_text().replace("h100-sxm", "a100-80gb").replace("nvlink4", "nvlink3")
    (tmp_path / "a100.yaml").write_text(text)
    a100, h100 = load_cluster(tmp_path / "a100.yaml"), load_cluster(EXAMPLES / "ref-64gpu.yaml")
    w = workload_from_mapping(_wl(training={"grad_comm_dtype": "fp8"}), "w.yaml")
    with pytest.raises(InfeasiblePlan, match=r"training.grad_comm_dtype \('fp8'\) is not supported by gpu a100-80gb"):
        check_hardware(w, a100)
    check_hardware(w, h100)
