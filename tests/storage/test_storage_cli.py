"""CLI of the storage model: the contracts (plan --json storage keys, checkpoint-size) and every bad input
of the storage, data and checkpoint sections: exit 2, the field and value named, no traceback."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slowlink.cli.main import app

EX = Path(__file__).parents[2] / "examples"
CLUSTER = EX / "ref-64gpu-storage.yaml"
WORKLOAD = EX / "llama3-8b-storage.yaml"
CONTRACT = {"read_demand_gbyte_s", "data_stall_s", "checkpoint_bytes", "checkpoint_write_s", "checkpoint_blocking_s",
            "checkpoint_restore_s", "checkpoints_that_fit"}
runner = CliRunner()


def _edit(tmp_path: Path, src: Path, old: str, new: str) -> str:
    text = src.read_text()
    assert old in text, old
    p = tmp_path / src.name
    p.write_text(text.replace(old, new, 1))
    return str(p)


def test_plan_json_has_the_storage_contract() -> None:
    res = runner.invoke(app, ["plan", str(CLUSTER), str(WORKLOAD), "--json"])
    assert res.exit_code == 0, res.output
    st = json.loads(res.output)["storage"]
    assert set(st) >= CONTRACT
    assert st["checkpoints_that_fit"] >= 1 and st["checkpoint_blocking_s"] < st["checkpoint_write_s"]


def test_plan_without_storage_section_still_sizes_the_checkpoint(tmp_path: Path) -> None:
    text = (EX / "ref-64gpu.yaml").read_text()
    bare = tmp_path / "bare.yaml"
    bare.write_text(text[: text.index("\nstorage:")] + "\n")
    res = runner.invoke(app, ["plan", str(bare), str(WORKLOAD), "--json"])
    assert res.exit_code == 0, res.output
    st = json.loads(res.output)["storage"]
    assert st["checkpoint_bytes"] > 0 and st["read_demand_gbyte_s"] > 0
    assert st["checkpoint_write_s"] is None and st["data_stall_s"] is None and st["checkpoints_that_fit"] is None


def test_plan_table_and_bottleneck_name_storage() -> None:
    res = runner.invoke(app, ["plan", str(EX / "ref-64gpu-nfs.yaml"), str(EX / "video-8b-files.yaml")])
    assert res.exit_code == 0, res.output
    assert "data stall (s/step)" in res.output and "checkpoint (s/step, amortised)" in res.output
    assert "ref-64gpu-nfs: storage: data stall" in " ".join(res.output.split())


def test_checkpoint_size_json() -> None:
    res = runner.invoke(app, ["checkpoint-size", str(EX / "llama3-8b.yaml"), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert {"checkpoint_bytes", "bytes_per_param", "parts"} <= set(data)
    assert data["bytes_per_param"] == 14.0
    assert sum(data["parts"].values()) == pytest.approx(data["checkpoint_bytes"])


def test_checkpoint_size_of_a_missing_file(cli_fails: Callable[..., str]) -> None:
    cli_fails(["checkpoint-size", "no-such.yaml"], "does not exist")


BAD_CLUSTER = [
    ("tiers:\n    - {name: hot,", "tiers:\n    - {name: capacity,", "storage: tiers.1.name ('capacity')"),
    ("capacity_tb: 2,", "capacity_tb: 0,", "storage.tiers.0.capacity_tb (0)"),
    ("tier: hot}", "tier: warm}", "storage: retention.tier ('warm') must name a tier"),
    ("data_tier: capacity", "data_tier: tape", "storage: data_tier ('tape')"),
    ("keep_last: 3", "keep_last: 0", "storage.retention.keep_last (0)"),
    ("per_client_write_gbyte_s: 4", "per_client_write_gbyte_s: -4", "storage.per_client_write_gbyte_s (-4)"),
    ("data_tier: capacity", "data_tier: capacity\n  capacity_tb: 5", "storage: capacity_tb (5.0) and tiers"),
    ("retention: {", "retention: {keep_forever: 1, ", "storage.retention.keep_forever: unknown key"),
]


@pytest.mark.parametrize(("old", "new", "needle"), BAD_CLUSTER, ids=[b[2][:30] for b in BAD_CLUSTER])
def test_bad_storage_section(tmp_path: Path, old: str, new: str, needle: str, cli_fails: Callable[..., str]) -> None:
    cli_fails(["plan", _edit(tmp_path, CLUSTER, old, new), str(WORKLOAD)], needle)


BAD_WORKLOAD = [
    ("shard_size: 1GB", "shard_size: 0", "data.shard_size (0): must be > 0 bytes"),
    ("shard_size: 1GB", "shard_size: big", "data.shard_size ('big')"),
    ("layout: shards", "layout: folders", "data.layout ('folders')"),
    ("samples: 200000000", "samples: 0", "data.samples (0)"),
    ("reader_workers_per_gpu: 2", "reader_workers_per_gpu: 0", "data.reader_workers_per_gpu (0)"),
    ("interval_steps: 100", "interval_steps: 100, interval_minutes: 30", "give exactly one of them"),
    ("interval_steps: 100, ", "", "give exactly one of them"),
    ("mode: async", "mode: later", "checkpoint.mode ('later')"),
    ("layout: sharded", "layout: sharded, weights_dtype: int4", "checkpoint.weights_dtype ('int4')"),
    ("host_staging_gib: 64", "host_staging_gib: -1", "checkpoint.host_staging_gib (-1)"),
    ("host_staging_gib: 64", "host_staging_gib: 64, host_link: pcie-gen9", "checkpoint.host_link ('pcie-gen9')"),
]


@pytest.mark.parametrize(("old", "new", "needle"), BAD_WORKLOAD, ids=[b[2][:30] for b in BAD_WORKLOAD])
def test_bad_data_or_checkpoint_section(tmp_path: Path, old: str, new: str, needle: str,
                                        cli_fails: Callable[..., str]) -> None:
    cli_fails(["plan", str(CLUSTER), _edit(tmp_path, WORKLOAD, old, new)], needle)


def test_checkpoint_size_rejects_a_bad_checkpoint_section(tmp_path: Path, cli_fails: Callable[..., str]) -> None:
    cli_fails(["checkpoint-size", _edit(tmp_path, WORKLOAD, "mode: async", "mode: 3")], "checkpoint.mode (3)")


def test_async_on_a_gpu_without_a_known_host_link(tmp_path: Path, cli_fails: Callable[..., str]) -> None:
    (tmp_path / "mine.yaml").write_text(
        "gpus:\n  my-gpu: {bf16_tflops: 989.4, fp16_tflops: 989.4, fp8_tflops: 1978.9, fp32_tflops: 67, "
        "hbm_gib: 79.6, hbm_gbyte_s: 3350, arch: hopper}\n")
    cluster = _edit(tmp_path, CLUSTER, "gpu: h100-sxm", "gpu: my-gpu\ncatalog: [mine.yaml]")
    cli_fails(["plan", cluster, str(WORKLOAD)], "checkpoint.host_link (None): gpu my-gpu")
    fixed = tmp_path / "w.yaml"
    fixed.write_text(WORKLOAD.read_text().replace("host_staging_gib: 64", "host_staging_gib: 64, host_link: nvlink4"))
    assert runner.invoke(app, ["plan", cluster, str(fixed)]).exit_code == 0
