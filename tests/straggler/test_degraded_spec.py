"""The cluster spec's `degraded:` and `variability:` keys: resolution and every bad input's message."""

from __future__ import annotations

from typing import Any

import pytest

from slowlink import units
from slowlink.errors import SpecError
from slowlink.spec.cluster import cluster_from_mapping


def _cluster(degraded: list[dict[str, Any]], **extra: Any) -> Any:
    return cluster_from_mapping({
        "name": "t", "nodes": 4, "gpus_per_node": 8, "gpu": "h100-sxm",
        "scale_up": {"link": "nvlink4", "domain_gpus": 8},
        "nics": {"compute": {"per_node": 8, "speed_gbit_s": 400}},
        "fabric": {"transport": "infiniband", "tiers": 2}, "degraded": degraded, **extra})


def test_parts_resolve_to_model_keys() -> None:
    c = _cluster([{"node": 3, "nic": 0, "rate": 0.5}, {"node": 1, "gpu": 2, "clock": 0.9},
                  {"node": 2, "clock": 0.95}, {"node": 0, "delay_ms": 5.0},
                  {"link": "leaf:0->spine:0", "rate": 0.25}],
                 variability={"compute_cv": 0.02, "network_cv": 0.05})
    d = c.degraded
    assert d.nic_rate == {(3, 0): 0.5}
    assert d.gpu_clock[(1, 2)] == 0.9 and all(d.gpu_clock[(2, g)] == 0.95 for g in range(8))
    assert d.node_delay_s == {0: 5 * units.MS}
    assert d.link_rate == {"leaf:0->spine:0": 0.25}
    assert d.names[0] == "node 3 NIC 0 at 50%" and bool(d)
    assert c.variability is not None and c.variability.network_cv == 0.05


def test_uniform_cluster_has_no_degraded_parts() -> None:
    assert not _cluster([]).degraded


@pytest.mark.parametrize(("part", "words"), [
    ({"node": 4, "nic": 0, "rate": 0.5}, "degraded.0.node (4) must be < nodes (4)"),
    ({"node": 0, "nic": 8, "rate": 0.5}, "degraded.0.nic (8) must be < nics.compute.per_node (8)"),
    ({"node": 0, "gpu": 9, "clock": 0.5}, "degraded.0.gpu (9) must be < gpus_per_node (8)"),
    ({"node": 0, "nic": 0, "rate": 1.5}, "degraded.0.rate (1.5)"),
    ({"node": 0, "nic": 0, "rate": 0}, "degraded.0.rate (0)"),
    ({"node": 0, "nic": 0}, "nic (0) takes rate only"),
    ({"node": 0, "rate": 0.5}, "rate (0.5) needs nic"),
    ({"node": 0}, "node (0) needs nic + rate"),
    ({"nic": 0, "rate": 0.5}, "needs node"),
    ({"link": "leaf:0->spine:0", "clock": 0.5}, "link ('leaf:0->spine:0') takes rate only"),
    ({"node": 0, "nic": 0, "rate": 0.5, "colour": "red"}, "degraded.0.colour: unknown key"),
])
def test_bad_parts_name_field_value_and_rule(part: dict[str, Any], words: str) -> None:
    with pytest.raises(SpecError) as exc:
        _cluster([part])
    assert words in str(exc.value)


def test_bad_variability_names_field() -> None:
    with pytest.raises(SpecError, match=r"variability.compute_cv \(2\.0\)"):
        _cluster([], variability={"compute_cv": 2.0})
