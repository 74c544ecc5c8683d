"""Reading spec files: every failure is a SpecError naming the file and what is wrong."""

import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from slowlink.errors import SpecError
from slowlink.fileio import expanded_nodes, format_validation_error, read_mapping

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_reads_yaml_and_json(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("nodes: 8\nname: x\n")
    (tmp_path / "b.json").write_text('{"nodes": 8}')
    assert read_mapping(tmp_path / "a.yaml") == {"nodes": 8, "name": "x"}
    assert read_mapping(tmp_path / "b.json") == {"nodes": 8}


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"nope.yaml.*does not exist"):
        read_mapping(tmp_path / "nope.yaml")


def test_directory_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"is a directory"):
        read_mapping(tmp_path)


def test_yaml_syntax_error_gives_line_and_column(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes: 8\nfabric: {transport: infiniband\n")
    with pytest.raises(SpecError, match=r"not valid YAML/JSON at line \d+, column \d+"):
        read_mapping(bad)


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    bad = tmp_path / "list.yaml"
    bad.write_text("- 1\n- 2\n")
    with pytest.raises(SpecError, match=r"top level must be a mapping.*list"):
        read_mapping(bad)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")
    nodes: int = Field(ge=1)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"nodes": 0}, "src: nodes (0): Input should be greater than or equal to 1"),
        ({"nodes": "many"}, "src: nodes ('many'):"),
        ({}, "src: nodes: required key is missing"),
        ({"nodes": 2, "gpus": 8}, "src: gpus: unknown key"),
    ],
)
def test_validation_errors_name_field_value_and_rule(data: dict[str, object], expected: str) -> None:
    with pytest.raises(ValidationError) as info:
        _Model.model_validate(data)
    assert expected in format_validation_error(info.value, "src")


def test_binary_file_is_a_clean_error(tmp_path: Path) -> None:
    bad = tmp_path / "c.yaml"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00")
    with pytest.raises(SpecError, match=r"c.yaml: not a text file \(byte \d+ is not UTF-8\)"):
        read_mapping(bad)


def test_duplicate_yaml_key_names_key_and_lines(tmp_path: Path) -> None:
    bad = tmp_path / "c.yaml"
    bad.write_text("name: x\nnodes: 8\nfabric: {tiers: 2}\nnodes: 4\n")
    with pytest.raises(SpecError, match=r"c.yaml: key 'nodes' is written twice at line 4 \(first at line 2\)"):
        read_mapping(bad)


def test_duplicate_nested_yaml_key_and_json_key(tmp_path: Path) -> None:
    nested = tmp_path / "c.yaml"
    nested.write_text("fabric:\n  tiers: 2\n  tiers: 3\n")
    with pytest.raises(SpecError, match=r"key 'tiers' is written twice at line 3"):
        read_mapping(nested)
    js = tmp_path / "c.json"
    js.write_text('{"nodes": 8, "nodes": 4}')
    with pytest.raises(SpecError, match=r"c.json: key 'nodes' is written twice"):
        read_mapping(js)


def test_yaml_merge_keys_still_work(tmp_path: Path) -> None:
    ok = tmp_path / "c.yaml"
    ok.write_text("base: &b {tiers: 2}\nfabric:\n  <<: *b\n  topology: fat-tree\n")
    assert read_mapping(ok)["fabric"] == {"tiers": 2, "topology": "fat-tree"}


@pytest.mark.parametrize(("text", "field", "value"), [
    ("fabric: {oversubscription: .inf}\n", "fabric.oversubscription", "inf"),
    ("storage: {read_gbyte_s: .nan}\n", "storage.read_gbyte_s", "nan"),
    ("ranks: [1, -.inf]\n", "ranks.1", "-inf"),
])
def test_non_finite_numbers_are_rejected(tmp_path: Path, text: str, field: str, value: str) -> None:
    bad = tmp_path / "c.yaml"
    bad.write_text(text)
    with pytest.raises(SpecError, match=rf"c.yaml: {field} \({value}\): must be a finite number"):
        read_mapping(bad)


def test_json_nan_is_rejected(tmp_path: Path) -> None:
    bad = tmp_path / "c.json"
    bad.write_text('{"nodes": NaN}')
    with pytest.raises(SpecError, match=r"nodes \(nan\): must be a finite number"):
        read_mapping(bad)


class _Outer(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    inner: _Model
    order: list[int]


def test_long_values_are_cut_and_sections_never_repeated() -> None:
    with pytest.raises(ValidationError) as info:
        _Outer.model_validate({"inner": {"nodes": 0}, "order": "x" * 500})
    text = format_validation_error(info.value, "src")
    assert "src: inner.nodes (0):" in text and "src: order ('xxx" in text and "...): must be a list" in text
    assert all(len(line) < 160 for line in text.splitlines()), text
    with pytest.raises(ValidationError) as info:
        _Outer.model_validate({"inner": "n" * 500, "order": []})
    assert len(format_validation_error(info.value, "src")) < 160


def test_unknown_key_points_to_the_page_of_its_kind() -> None:
    with pytest.raises(ValidationError) as info:
        _Model.model_validate({"nodes": 2, "foo": 1})
    assert "docs/workload.md" in format_validation_error(info.value, "w.yaml", "workload")
    assert "docs/sim.md" in format_validation_error(info.value, "s.yaml", "scenario")


def test_swapped_files_get_a_hint() -> None:
    from slowlink.fileio import check_kind, guess_kind

    workload = {"name": "w", "model": {}, "training": {}, "parallel": {}}
    cluster = {"name": "c", "nodes": 8, "gpus_per_node": 8, "fabric": {}}
    assert guess_kind(workload) == "workload" and guess_kind(cluster) == "cluster"
    with pytest.raises(SpecError, match=r"w.yaml: this looks like a workload file .* not a cluster file "
                                        r"\(the cluster file comes first"):
        check_kind(workload, "cluster", "w.yaml")
    check_kind(cluster, "cluster", "c.yaml")  # the right kind passes
    check_kind({"nodes": 8, "model": {}}, "cluster", "c.yaml")  # a cluster key present: validated as one


def test_check_output(tmp_path: Path) -> None:
    from slowlink.fileio import check_output

    assert check_output(tmp_path / "h.png", "--heatmap", (".png",)) == tmp_path / "h.png"
    with pytest.raises(SpecError, match=r"--heatmap \('.*h.txt'\) must end in .png"):
        check_output(tmp_path / "h.txt", "--heatmap", (".png",))
    with pytest.raises(SpecError, match=r"folder '.*nodir' does not exist"):
        check_output(tmp_path / "nodir" / "h.png", "--heatmap", (".png",))


def test_an_alias_bomb_is_refused_before_it_is_built(tmp_path: Path, cli_fails: Callable[..., str]) -> None:
    """Ten levels of anchors, each repeating the last nine times: 9**10 values from eleven lines."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join([*lines, "name: bomb"]) + "\n")
    t0 = time.perf_counter()
    with pytest.raises(SpecError, match=r"aliases \(\*name\) expand it to more than 1,000,000 values"):
        read_mapping(bomb)
    assert time.perf_counter() - t0 < 5.0  # refused from the node graph, never expanded
    cli_fails(["plan", str(bomb), str(EXAMPLES / "llama3-8b.yaml")], "expand it to more than 1,000,000 values")


def test_shared_anchors_below_the_bound_still_load(tmp_path: Path) -> None:
    p = tmp_path / "ok.yaml"
    p.write_text("base: &b {tp: 2, pp: 1}\none: *b\ntwo: *b\n")
    data = read_mapping(p)
    assert data["one"] == data["two"] == {"tp": 2, "pp": 1}
    assert expanded_nodes(yaml.compose("a: &x [1, 2]\nb: *x\n")) == 1 + 2 * (1 + 3)  # mapping, keys, lists, items
    assert expanded_nodes(yaml.compose("loop: &l [1, *l]\n")) == 1 + 1 + (1 + 1 + 1)  # a node inside itself: once
    p.write_text("loop: &l [1, *l]\n")
    with pytest.raises(SpecError, match="nested too deeply"):  # a list that contains itself has no end
        read_mapping(p)


def test_a_document_nested_past_python_s_stack_is_refused(tmp_path: Path, cli_fails: Callable[..., str]) -> None:
    deep = tmp_path / "deep.yaml"
    deep.write_text("name: " + "[" * 995 + "]" * 995 + "\n")
    with pytest.raises(SpecError, match="nested too deeply"):
        read_mapping(deep)
    cli_fails(["plan", str(deep), str(EXAMPLES / "llama3-8b.yaml")], "nested too deeply")


def test_a_file_too_large_to_be_a_spec_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """A multi-GB file given as a spec was read whole (issue 39): past MAX_SPEC_BYTES it is refused from its size."""
    from slowlink.errors import SpecError
    from slowlink.fileio import MAX_SPEC_BYTES, read_mapping

    big = tmp_path / "big.yaml"
    with big.open("wb") as f:  # sparse: no disk used
        f.truncate(MAX_SPEC_BYTES + 1)
    with pytest.raises(SpecError, match=r"must be at most 67,108,864 bytes: a spec holds a few kB"):
        read_mapping(big)
