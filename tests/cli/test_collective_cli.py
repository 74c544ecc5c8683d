"""`slowlink collective` and `slowlink validate collectives`: output, JSON, and every bad input (exit 2)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from slowlink.cli.main import app

REF = Path(__file__).parents[2] / "examples" / "ref-64gpu.yaml"
runner = CliRunner()


def _run(*args: str) -> tuple[int, str]:
    r = runner.invoke(app, list(args))
    return r.exit_code, r.output + (r.stderr if r.stderr_bytes is not None else "")


def _cluster(tmp_path: Path, edit: dict[str, object]) -> Path:
    data = yaml.safe_load(REF.read_text())
    for key, value in edit.items():
        node = data
        *parents, last = key.split(".")
        for part in parents:
            node = node[part]
        node[last] = value
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_single_size_json_is_one_object() -> None:
    code, out = _run("collective", str(REF), "--op", "all_reduce", "--size", "1GiB", "--json")
    assert code == 0, out
    obj = json.loads(out)
    assert obj["size_bytes"] == 2**30 and obj["ranks"] == 64
    assert {"time_s", "algbw_gbyte_s", "busbw_gbyte_s", "algorithm", "protocol"} <= set(obj)


def test_sweep_json_rises_and_saturates_at_the_nic() -> None:
    code, out = _run("collective", str(REF), "--op", "all_reduce", "--sweep", "1KiB:8GiB:4", "--json")
    assert code == 0, out
    rows = json.loads(out)
    assert len(rows) == 12
    bw = [r["busbw_gbyte_s"] for r in rows]
    assert all(b >= a for a, b in itertools.pairwise(bw))
    assert rows[-1]["bottleneck"].startswith("NIC 1x400G")
    assert 42 <= bw[-1] <= 50   # one NDR NIC per node: 0.94 x 50 GB/s = 47


def test_sweep_table_like_nccl_tests() -> None:
    code, out = _run("collective", str(REF), "--sweep", "8:64:2", "--dtype", "bf16", "--ranks", "16")
    assert code == 0, out
    for col in ("size", "count", "type", "time", "algbw", "busbw", "algorithm", "protocol", "bottleneck"):
        assert col in out
    assert "bf16" in out and "16 ranks" in out


def test_validate_collectives_prints_errors() -> None:
    code, out = _run("validate", "collectives")
    assert code == 0, out
    assert "a100_node_all_reduce" in out and "mean |error|" in out
    code, out = _run("validate", "collectives", "--json")
    data = json.loads(out)
    cases = {p["case"] for p in data["points"]}
    assert {"a100_node_all_reduce", "h100_node_all_reduce", "h200_node_all_reduce", "gb200_nvl72_20rack",
            "h100_8node_sharp", "h100_2node", "b200_2node"} <= cases
    # Known gaps, reported rather than hidden: the GB200 curves, run with NVLS off (one rack's 72-rank NVLink5
    # ring -47..-21%: the model's NVLink efficiency and ring step wait are an 8-GPU node's; 20 racks +49..+250%,
    # unexplained; docs/collectives.md) and an 8-node run with SHARP (NCCL CollNet, not modelled).
    known = {"gb200_nvl72_1rack", "gb200_nvl72_20rack", "h100_8node_sharp"}
    assert max(abs(p["error_pct"]) for p in data["points"] if p["case"] not in known) < 26


@pytest.mark.parametrize(("edit", "needle"), [
    ({"gpus_per_node": "eight"}, "gpus_per_node ('eight')"),
    ({"colour": "blue"}, "colour: unknown key"),
    ({"scale_up.bandwidth_gbyte_s": 0}, "scale_up.bandwidth_gbyte_s (0)"),
    ({"nics.compute.speed_gbit_s": 0}, "nics.compute.speed_gbit_s (0)"),
    ({"nics.compute.speed_gbit_s": -400}, "nics.compute.speed_gbit_s (-400)"),
    ({"gpu": "h100-sxn"}, "did you mean h100-sxm"),
    ({"scale_up.link": "nvlnk4"}, "did you mean nvlink4"),
])
def test_bad_cluster_files_exit_2(tmp_path: Path, edit: dict[str, object], needle: str) -> None:
    code, out = _run("collective", str(_cluster(tmp_path, edit)), "--size", "1MiB")
    assert code == 2, out
    assert needle in out
    assert "Traceback" not in out


def test_missing_file_and_bad_yaml(tmp_path: Path) -> None:
    code, out = _run("collective", str(tmp_path / "nope.yaml"), "--size", "1MiB")
    assert code == 2 and "does not exist" in out and "Traceback" not in out
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    code, out = _run("collective", str(bad), "--size", "1MiB")
    assert code == 2 and "not valid YAML" in out and "line" in out


@pytest.mark.parametrize(("args", "needle"), [
    (("--size", "1GiB", "--ranks", "65"), "--ranks (65) must be between 1 and the cluster's GPUs"),
    (("--size", "1 parsec"), "--size: size ('1 parsec') is not a size"),
    (("--sweep", "8:1GiB"), "--sweep: sweep ('8:1GiB') must be MIN:MAX:FACTOR"),
    (("--sweep", "8:1GiB:1"), "sweep factor ('1') must be > 1"),
    (("--sweep", "1GiB:8:2"), "needs 0 < MIN <= MAX"),
    ((), "give exactly one of --size"),
    (("--size", "1MiB", "--op", "allreduce"), "op ('allreduce') is not a collective"),
    (("--size", "1MiB", "--dtype", "float7"), "--datatype ('float7') is not one of"),
])
def test_bad_options_exit_2(args: tuple[str, ...], needle: str) -> None:
    code, out = _run("collective", str(REF), *args)
    assert code == 2, out
    assert needle in out
    assert "Traceback" not in out


def test_flow_fidelity_same_schema_and_agrees_on_uncontended_all_to_all() -> None:
    args = ["collective", "examples/ref-64gpu.yaml", "--op", "all_gather", "--size", "1GiB", "--json"]
    ana = json.loads(CliRunner().invoke(app, args).stdout)
    flow_res = CliRunner().invoke(app, [*args, "--fidelity", "flow"])
    assert flow_res.exit_code == 0, flow_res.output
    flow = json.loads(flow_res.stdout)
    assert set(ana) <= set(flow)
    # Both models are bound by the one 400G NIC per node at 1 GiB: they agree within 15%.
    assert abs(flow["time_s"] - ana["time_s"]) / ana["time_s"] < 0.15


def test_flow_fidelity_unsupported_op_is_a_clean_error() -> None:
    res = CliRunner().invoke(app, ["collective", "examples/ref-64gpu.yaml", "--op", "broadcast",
                                    "--size", "1MiB", "--fidelity", "flow"])
    assert res.exit_code == 2
    assert "not simulated" in res.output and "Traceback" not in res.output


@pytest.mark.parametrize("fidelity", ["analytical", "flow"])
@pytest.mark.parametrize("op", ["all_to_all", "send_recv"])
def test_algorithm_on_a_point_to_point_op_is_refused(op: str, fidelity: str) -> None:
    """NCCL_ALGO selects among ring/tree/collnet/nvls/pat for the collectives only; all_to_all and send_recv
    are ncclSend/ncclRecv, so a forced algorithm would be silently ignored (issue 19)."""
    code, out = _run("collective", str(REF), "--op", op, "--size", "1MiB", "--algorithm", "tree",
                     "--fidelity", fidelity)
    assert code == 2, out
    assert f"--algorithm ('tree') does not apply to {op}" in " ".join(out.split())
    assert "all_reduce, all_gather, reduce_scatter, broadcast, reduce only" in " ".join(out.split())
    assert "Traceback" not in out


@pytest.mark.parametrize("op", ["all_to_all", "send_recv"])
def test_ll128_on_a_point_to_point_op_is_refused(op: str) -> None:
    """NCCL runs p2p with LL or Simple by P2P_LL_THRESHOLD, never LL128: a forced LL128 would price a transfer
    NCCL does not make."""
    code, out = _run("collective", str(REF), "--op", op, "--size", "1MiB", "--protocol", "LL128")
    assert code == 2, out
    flat = " ".join(out.split())
    assert f"--protocol ('LL128') does not apply to {op}" in flat and "force one of LL, Simple" in flat
    assert "Traceback" not in out


def test_nccl_tests_flags_and_forced_algorithm() -> None:
    code, out = _run("collective", str(REF), "-b", "1MiB", "-e", "4MiB", "-f", "2", "-d", "half",
                     "--algorithm", "ring", "--protocol", "Simple", "--json")
    assert code == 0, out
    rows = json.loads(out)
    assert [r["size_bytes"] for r in rows] == [2**20, 2**21, 2**22]
    assert {(r["algorithm"], r["protocol"]) for r in rows} == {("ring", "Simple")}
