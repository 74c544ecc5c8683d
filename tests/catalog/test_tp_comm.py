"""The bundled userbuffers configs (catalog/tp_comm.py, data/tp_comm_configs.yaml) and their checks."""

from __future__ import annotations

import copy
from importlib import resources
from typing import Any

import pytest

from slowlink.catalog.tp_comm import DATA_FILE, DEFAULT, parse_configs, tp_comm_config, tp_comm_configs
from slowlink.errors import SpecError
from slowlink.fileio import parse_text
from slowlink.spec.workload import workload_from_mapping
from slowlink.workload.validate import _data

RING = ("qkv_fprop", "fc1_fprop", "proj_dgrad", "fc2_dgrad")
PIPE = ("proj_fprop", "fc2_fprop")
BULK = ("qkv_dgrad", "qkv_wgrad", "fc1_dgrad", "fc1_wgrad")


def test_the_default_is_te_v1_13_initialize_ub() -> None:
    # TE v1.13 base.py get_default_config: num_sm 1 (ring_exchange) else 16, no SM margin, 4 pipeline splits
    te = tp_comm_config(DEFAULT).gemms
    assert {g: (te[g].method, te[g].num_sm) for g in te} == {
        **{g: ("ring_exchange", 1) for g in RING}, **{g: ("pipeline", 16) for g in PIPE},
        **{g: ("bulk", 16) for g in BULK}}
    assert not any(o.set_sm_margin or o.aggregate for o in te.values())
    assert {te[g].num_splits for g in PIPE} == {4}


def test_a_config_is_merged_over_the_defaults() -> None:
    # dgxc-benchmarking 25.02 gpt3_175b_hydra.yaml: fc2_fprop pipeline, num_sm 20, set_sm_margin 1;
    # qkv_fprop sets only method and aggregate, so keeps TE's num_sm 1
    gpt3 = tp_comm_config("dgxc-25.02-gpt3-175b").gemms
    assert (gpt3["fc2_fprop"].num_sm, gpt3["fc2_fprop"].set_sm_margin, gpt3["fc2_fprop"].num_splits) == (20, True, 4)
    assert (gpt3["qkv_fprop"].num_sm, gpt3["qkv_fprop"].aggregate) == (1, False)
    assert gpt3["fc2_dgrad"].aggregate
    assert all(tp_comm_config(n).source for n in tp_comm_configs())


def _raw() -> dict[str, Any]:
    text = (resources.files("slowlink.catalog") / "data").joinpath(DATA_FILE).read_text("utf-8")
    return copy.deepcopy(parse_text(text, DATA_FILE, as_json=False))


@pytest.mark.parametrize(("edit", "expected"), [
    (lambda d: d["dgxc-25.02-gpt3-175b"]["gemms"].update(qkv_dgrad={"method": "ring_exchange"}),
     r"c.yaml: dgxc-25.02-gpt3-175b.gemms.qkv_dgrad.method \('ring_exchange'\): must be 'bulk', the only schedule"),
    (lambda d: d["dgxc-25.02-gpt3-175b"]["gemms"].update(qkv_dgrad={"num_splits": 4}),
     r"c.yaml: dgxc-25.02-gpt3-175b.gemms.qkv_dgrad: num_splits \(4\) is for the pipeline method only"),
    (lambda d: d["dgxc-25.02-gpt3-175b"]["gemms"].update(proj_fprop={"aggregate": True}),
     r"gemms.proj_fprop: aggregate \(True\) is for the ring_exchange method only, not pipeline"),
    (lambda d: d["dgxc-25.02-gpt3-175b"]["gemms"].update(proj_fprop={"num_sm": 0}),
     r"gemms.proj_fprop: num_sm \(0\): Input should be greater than or equal to 1"),
    (lambda d: d["dgxc-25.02-gpt3-175b"]["gemms"].update(qkv_gemm={"num_sm": 2}),
     r"c.yaml: dgxc-25.02-gpt3-175b: gemms.qkv_gemm"),
    (lambda d: d["dgxc-25.02-gpt3-175b"].pop("source"), r"c.yaml: dgxc-25.02-gpt3-175b: source: required key"),
    (lambda d: d.pop(DEFAULT), r"c.yaml: \(top level\): must map config names to configs and hold 'te-v1.13-def"),
])
def test_bad_configs_name_the_field_the_value_and_the_rule(edit: Any, expected: str) -> None:
    data = _raw()
    assert parse_configs(data, "c.yaml")  # the file as shipped is fine
    edit(data)
    with pytest.raises(SpecError, match=expected):
        parse_configs(data, "c.yaml")


def test_a_workload_naming_no_known_config_is_refused() -> None:
    wl = {"model": {"preset": "llama3-8b"}, "training": {"global_batch": 512}, "parallel": {"tp": 2, "dp": 32},
          "overlap": {"tp_comm": True, "tp_comm_config": "dgxc-25.02-gpt3"}}
    with pytest.raises(SpecError, match=r"w.yaml: overlap.tp_comm_config \('dgxc-25.02-gpt3'\) is not a known "
                                        r"userbuffers config .*did you mean dgxc-25.02-gpt3-175b"):
        workload_from_mapping(wl, "w.yaml")
    wl["overlap"]["tp_comm_config"] = "dgxc-25.02-gpt3-175b"
    assert workload_from_mapping(wl, "w.yaml").overlap.tp_comm_config == "dgxc-25.02-gpt3-175b"


def test_dgxc_rows_with_a_recipe_config_name_it() -> None:
    # the 25.02 GPT-3 175B and Llama 3.1 70B/405B yamls set ub_tp_comm_overlap_cfg; Nemotron-4 (15B 25.02, 340B
    # 24.11.1) set none, so TE's defaults apply
    cases = _data("heldout_runs.yaml")["cases"]
    rows = {r["id"]: r["workload"]["overlap"] for r in cases if r["id"].startswith("dgxc")}
    want = {"gpt3-175b": "dgxc-25.02-gpt3-175b", "llama31-70b": "dgxc-25.02-llama31-70b",
            "llama31-405b": "dgxc-25.02-llama31-405b", "nemotron4": DEFAULT}
    for rid, ov in rows.items():
        for key, name in want.items():
            if key in rid:
                assert ov.get("tp_comm_config", DEFAULT) == name, rid
