"""catalog.stack: the bundled stacks validate with every field cited, a workload's overrides apply with their own
source, and bad stack files or overrides are refused with the field, the value and the rule."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from slowlink.catalog.stack import DEFAULT, FIELDS, OVERRIDE, StackOverrides, buckets, parse_stacks, stack, stacks
from slowlink.errors import SpecError


def _bundled() -> dict[str, Any]:
    from importlib import resources

    text = (resources.files("slowlink.catalog") / "data" / "stacks.yaml").read_text("utf-8")
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def test_every_bundled_stack_validates_with_a_source_for_every_field() -> None:
    known = stacks()
    assert set(known) == {"megatron-core", "nemo", "torchtitan", "deepspeed", "fsdp"}
    for st in known.values():
        sources = dict(st.sources)
        assert set(sources) == set(FIELDS)
        assert all(len(s) > 10 for s in sources.values()), st.name
        assert st.version and st.repository


def test_the_cited_values_are_the_sources_defaults() -> None:
    k = stacks()
    # Megatron-Core core_r0.10.0: max(40M, 1M x dp) parameters; none without overlap
    assert k["megatron-core"].grad_bucket_params(8, 2.0) == 40e6
    assert k["megatron-core"].grad_bucket_params(192, 2.0) == 192e6
    assert not k["megatron-core"].fields.buckets_without_overlap
    # NeMo's comm-overlap callback: 128 * 1024 * 1024 parameters whatever the DP size
    assert k["nemo"].grad_bucket_params(1024, 2.0) == 128 * 1024 * 1024
    # DeepSpeed reduce_bucket_size and allgather_bucket_size 5e8 elements
    assert k["deepspeed"].grad_bucket_params(64, 2.0) == 5e8 and k["deepspeed"].fields.gather_bucket_params == 5e8
    # torchtitan's replicate(bucket_cap_mb=100), PyTorch DDP's 25 MiB, both with a 1 MiB first bucket
    assert k["torchtitan"].grad_bucket_params(64, 2.0) == 100 * 2**20 / 2
    assert k["fsdp"].grad_bucket_params(64, 4.0) == 25 * 2**20 / 4
    assert k["fsdp"].first_bucket_params(2.0) == 2**20 / 2
    assert k["torchtitan"].fields.reshard_after_forward == "not_with_pp"
    assert k["fsdp"].fields.pipeline_schedules == () and "interleaved" not in k["deepspeed"].fields.pipeline_schedules


def test_no_stack_is_megatron_core() -> None:
    assert stack() is stacks()[DEFAULT] and stack("nemo") is stacks()["nemo"]


def test_an_override_changes_one_field_and_names_its_source() -> None:
    st = stack(StackOverrides(name="deepspeed", grad_bucket_params=2e8))
    assert st.fields.grad_bucket_params == 2e8 and st.fields.gather_bucket_params == 5e8
    sources = dict(st.sources)
    assert sources["grad_bucket_params"] == OVERRIDE
    assert sources["gather_bucket_params"] != OVERRIDE
    js = st.to_json()
    fields = js["fields"]
    assert isinstance(fields, dict) and fields["grad_bucket_params"] == {"value": 2e8, "source": OVERRIDE}


def test_a_bucket_size_given_is_the_size() -> None:
    # Megatron-Core's max(40M, 1M x dp) is its default only when no bucket_size is given
    st = stack(StackOverrides(name="megatron-core", grad_bucket_params=1e7))
    assert st.grad_bucket_params(512, 2.0) == 1e7
    both = stack(StackOverrides(name="megatron-core", grad_bucket_params=1e7, grad_bucket_params_per_dp=1e6))
    assert both.grad_bucket_params(512, 2.0) == 512e6


def test_a_bucket_in_bytes_replaces_the_bucket_in_parameters() -> None:
    st = stack(StackOverrides(name="megatron-core", grad_bucket_bytes=2**26))
    assert st.fields.grad_bucket_params is None
    assert st.grad_bucket_params(512, 2.0) == 2**25  # per_dp no longer applies


def test_an_unknown_stack_names_the_nearest() -> None:
    with pytest.raises(SpecError, match=r"stack \('megatron'\) is not a bundled stack .*did you mean megatron-core"):
        stack("megatron")


def test_a_field_without_source_is_refused() -> None:
    data = _bundled()
    data["nemo"]["grad_bucket_params"] = {"value": 1e8}
    with pytest.raises(SpecError, match=r"stacks.yaml: nemo: grad_bucket_params.source"):
        parse_stacks(data, "stacks.yaml")


def test_both_bucket_units_are_refused() -> None:
    data = _bundled()
    data["fsdp"]["grad_bucket_params"] = {"value": 1e8, "source": "a test"}
    with pytest.raises(SpecError, match=r"exactly one must be given"):
        parse_stacks(data, "stacks.yaml")


def test_a_file_without_the_default_is_refused() -> None:
    data = _bundled()
    del data[DEFAULT]
    with pytest.raises(SpecError, match="hold 'megatron-core'"):
        parse_stacks(data, "stacks.yaml")


def test_buckets_cut_params_in_order() -> None:
    assert buckets(100.0, 40.0) == ((40.0, 2), (20.0, 1))
    assert buckets(100.0, 40.0, 1.0) == ((1.0, 1), (40.0, 2), (19.0, 1))
    assert buckets(80.0, 40.0) == ((40.0, 2),)
    assert buckets(10.0, 40.0) == ((10.0, 1),)
    assert buckets(0.0, 40.0) == ()
    assert buckets(1e12, 1.0) == ((1.0, 10**12),)  # counted, not listed


def test_a_workload_with_a_stack_stays_hashable() -> None:
    from slowlink.spec.workload import workload_from_mapping

    def w(bucket: float) -> object:
        return workload_from_mapping({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 8},
                                      "stack": {"name": "nemo", "grad_bucket_params": bucket}}, "w.yaml")

    assert hash(w(1e8)) == hash(w(1e8)) and w(1e8) == w(1e8) and w(1e8) != w(2e8)
