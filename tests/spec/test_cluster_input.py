"""Bad cluster files: each a SpecError naming the file, the field, the value and the rule."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from slowlink.errors import SpecError
from slowlink.spec.cluster import load_cluster

EXAMPLE = Path(__file__).parents[2] / "examples" / "ref-64gpu.yaml"


def _write(tmp_path: Path, **changes: object) -> Path:
    data = yaml.safe_load(EXAMPLE.read_text())
    data.update(changes)
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


@pytest.mark.parametrize(("changes", "expected"), [
    ({"nodes": True}, r"c.yaml: nodes \(True\): must be an integer"),
    ({"nodes": "8"}, r"c.yaml: nodes \('8'\): must be an integer"),
    ({"nodes": 8.0}, r"c.yaml: nodes \(8.0\): must be an integer"),
    ({"nics": {"compute": {"per_node": 1, "speed_gbit_s": float("inf")}}},
     r"c.yaml: nics.compute.speed_gbit_s \(inf\): must be a finite number"),
    ({"storage": {"system": "nfs", "read_gbyte_s": float("nan"), "write_gbyte_s": 1, "metadata_ops_s": 1}},
     r"c.yaml: storage.read_gbyte_s \(nan\): must be a finite number"),
    ({"gpu": "h1000"}, r"c.yaml: gpu \('h1000'\) is not in the catalog"),
])
def test_bad_values(tmp_path: Path, changes: dict[str, object], expected: str) -> None:
    with pytest.raises(SpecError, match=expected):
        load_cluster(_write(tmp_path, **changes))


def test_cross_field_rule_does_not_dump_the_spec(tmp_path: Path) -> None:
    p = _write(tmp_path, fabric={"transport": "infiniband", "topology": "dragonfly", "tiers": 2})
    with pytest.raises(SpecError) as info:
        load_cluster(p)
    assert "needs a dragonfly" in str(info.value) and "'transport'" not in str(info.value)
    assert len(str(info.value)) < 200


def test_a_workload_given_as_the_cluster(tmp_path: Path) -> None:
    p = tmp_path / "w.yaml"
    p.write_text((EXAMPLE.parent / "llama3-8b.yaml").read_text())
    with pytest.raises(SpecError, match=r"w.yaml: this looks like a workload file .* not a cluster file"):
        load_cluster(p)
