"""Issue 19: every bad input a user can give exits 2 with one clean message, no traceback, nothing written."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

EX = Path(__file__).parents[2] / "examples"
REF = str(EX / "ref-64gpu.yaml")
LLAMA = str(EX / "llama3-8b.yaml")


def _cluster(tmp_path: Path, old: str, new: str, name: str = "c.yaml") -> str:
    p = tmp_path / name
    p.write_text(Path(REF).read_text().replace(old, new, 1))
    return str(p)


def test_binary_cluster_and_workload(tmp_path: Path, cli_fails: Callable[..., str]) -> None:
    b = tmp_path / "b.yaml"
    b.write_bytes(b"\x00\xff\xfe\x89PNG")
    cli_fails(["plan", str(b), LLAMA], "b.yaml: not a text file")
    cli_fails(["plan", REF, str(b)], "b.yaml: not a text file")


def test_duplicate_key(tmp_path: Path, cli_fails: Callable[..., str]) -> None:
    cli_fails(["plan", _cluster(tmp_path, "nodes: 8", "nodes: 8\nnodes: 4"), LLAMA],
           "c.yaml: key 'nodes' is written twice at line 5 (first at line 4)")


def test_bool_for_an_int(tmp_path: Path, cli_fails: Callable[..., str]) -> None:
    cli_fails(["plan", _cluster(tmp_path, "nodes: 8", "nodes: true"), LLAMA],
              "c.yaml: nodes (True): must be an integer")


@pytest.mark.parametrize("value", [".inf", ".nan"])
def test_non_finite(tmp_path: Path, value: str, cli_fails: Callable[..., str]) -> None:
    cli_fails(["plan", _cluster(tmp_path, "read_gbyte_s: 64", f"read_gbyte_s: {value}"), LLAMA],
           "c.yaml: storage.read_gbyte_s", "must be a finite number")


def test_swapped_files(cli_fails: Callable[..., str]) -> None:
    cli_fails(["plan", LLAMA, REF], "looks like a cluster file", "the cluster file comes first")


def test_unknown_workload_key_points_to_the_workload_doc(tmp_path: Path, cli_fails: Callable[..., str]) -> None:
    w = tmp_path / "w.yaml"
    w.write_text("model: {preset: llama3-8b, foo: 1}\ntraining: {global_batch: 512}\n")
    cli_fails(["plan", REF, str(w)], "w.yaml: model.foo: unknown key", "docs/workload.md")


@pytest.mark.parametrize(("text", "needle"), [
    ("model: {preset: llama3-8b, moe: {experts: 4, top_k: 8, expert_ffn_hidden: 1024}}\n"
     "training: {global_batch: 512}\nparallel: {tp: 2, dp: 32}\n", "top_k (8) must be <= experts (4)"),
    ("model: {preset: llama3-8b}\ntraining: {global_batch: 512}\nparallel: {tp: 2, dp: 32, vp: 2}\n",
     "vp (2) > 1 needs pp > 1"),
    ("model: {preset: llama3-8b, seq_len: 8190}\ntraining: {global_batch: 512}\nparallel: {tp: 2, dp: 8, cp: 4}\n",
     "model.seq_len (8190) must be a multiple of 2 * cp (8)"),
    ("model: {preset: llama3-8b}\ntraining: {global_batch: 512, cross_entropy: apex}\n",
     "training.cross_entropy ('apex'): Input should be 'megatron', 'megatron_fused', 'fused' or 'gathered'"),
    ("model: {preset: llama3-8b, dropout: 0.1}\ntraining: {global_batch: 512}\n",
     "model.dropout (0.1): must be true or false"),
])
def test_bad_workloads(tmp_path: Path, text: str, needle: str, cli_fails: Callable[..., str]) -> None:
    w = tmp_path / "w.yaml"
    w.write_text(text)
    cli_fails(["plan", REF, str(w)], "w.yaml", needle)


def _scenario(tmp_path: Path, traffic: str, cluster: str = REF) -> str:
    p = tmp_path / "s.yaml"
    p.write_text(f"cluster: {cluster}\ntraffic:\n{traffic}")
    return str(p)


def test_heatmap_checked_before_the_simulation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               cli_fails: Callable[..., str]) -> None:
    import slowlink.sim.scenario as sim

    def never(*_: object) -> None:
        raise AssertionError("the simulation ran before --heatmap was checked")

    monkeypatch.setattr(sim, "run_scenario", never)
    scen = str(EX / "scenario-two-jobs.yaml")
    cli_fails(["simulate", scen, "--heatmap", str(tmp_path / "nodir" / "h.png")], "does not exist")
    cli_fails(["simulate", scen, "--heatmap", str(tmp_path / "h.txt")], "must end in .png")
    assert not list(tmp_path.iterdir())


def test_forced_nvls_without_nvlink_sharp(tmp_path: Path, cli_fails: Callable[..., str]) -> None:
    a100 = _cluster(tmp_path, "nvlink4", "nvlink3", "a100.yaml")
    s = _scenario(tmp_path, "  - {name: a, kind: collective, op: all_reduce, size: 64MiB, algorithm: nvls}\n", a100)
    cli_fails(["simulate", s], "s.yaml: traffic.0.algorithm ('nvls') needs NVLink SHARP", "nvlink3")


def test_forced_algorithm_on_all_to_all(tmp_path: Path, cli_fails: Callable[..., str]) -> None:
    s = _scenario(tmp_path, "  - {name: a, kind: collective, op: all_to_all, size: 64MiB, algorithm: ring}\n")
    cli_fails(["simulate", s], "s.yaml: traffic.0.algorithm ('ring') does not apply to all_to_all")


def test_two_traffics_with_one_name(tmp_path: Path, cli_fails: Callable[..., str]) -> None:
    t = "  - {name: a, kind: collective, op: all_reduce, size: 1MiB}\n"
    cli_fails(["simulate", _scenario(tmp_path, t + t)], "traffic.1.name ('a') is also the name of traffic.0")


def test_sizes_below_one_element(cli_fails: Callable[..., str]) -> None:
    cli_fails(["collective", REF, "--size", "3B"], "must be >= one float element (4 B)")
    cli_fails(["bench", "collectives", "-b", "3B", "-e", "3B", "--no-results"], "-b/--minbytes ('3B')",
           "one float element (4 B)")


@pytest.fixture
def no_ranks(tmp_path: Path) -> Path:
    p = tmp_path / "r.json"
    p.write_text(json.dumps({"kind": "collectives", "env": {}, "config": {}, "rows": [
        {"op": "all_reduce", "size_bytes": 1048576, "time_s": 1e-3, "busbw_gbyte_s": 1.0}]}))
    return p


def test_malformed_record(no_ranks: Path, tmp_path: Path, cli_fails: Callable[..., str]) -> None:
    cluster = tmp_path / "c.yaml"
    cluster.write_text(Path(REF).read_text())
    cli_fails(["collective", REF, "--compare", str(no_ranks)], "r.json: rows.0.ranks: required key is missing")
    cli_fails(["calibrate", str(no_ranks), "--cluster", str(cluster)], "rows.0.ranks: required key is missing")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml", "r.json"]  # nothing half-written


def test_emulated_all_to_all_size_checked_before_anything_is_up(monkeypatch: pytest.MonkeyPatch,
                                                                 cli_fails: Callable[..., str]) -> None:
    from slowlink.emulate import net

    def never() -> None:
        raise AssertionError("reached check_root: the size was not checked first")

    monkeypatch.setattr(net, "check_root", never)
    cli_fails(["validate", "emulated", str(EX / "emulate-flat.yaml"), "--ops", "all_to_all", "--size", "1000B"],
           "must be a multiple of 4 B x 4 ranks = 16 B for all_to_all")
    cli_fails(["validate", "emulated", str(EX / "emulate-flat.yaml"), "--ops", "all_reduce", "--size", "3B"],
           "must be a positive multiple of 4 B")
