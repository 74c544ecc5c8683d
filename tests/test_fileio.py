"""Reading spec files: every failure is a SpecError naming the file and what is wrong."""

from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from slowlink.errors import SpecError
from slowlink.fileio import format_validation_error, read_mapping


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
