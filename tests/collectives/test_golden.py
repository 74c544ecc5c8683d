"""Golden tests: the model against published nccl-tests numbers (calibration/collective_bandwidth.yaml).

Sources: Azure/AI-benchmarking-guide ND A100 v4, ND H100 v5, ND H200 v5; NVIDIA/nccl-tests issues 212, 290,
119; coreweave/nccl-tests README (GB200 NVL72).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from slowlink import units
from slowlink.collectives import predict
from slowlink.collectives.validate import a100_curve, maintainer_points, node_cluster
from slowlink.spec.cluster import Cluster, cluster_from_mapping

DATA = Path(__file__).parents[1] / "data" / "collective_bandwidth.yaml"


def test_a100_curve_within_10pct_from_16mib_and_25pct_at_1mib() -> None:
    points = a100_curve(yaml.safe_load(DATA.read_text()))
    assert len(points) == 6
    for p in points:
        tol = 0.25 if p.size_bytes < 16 * units.MiB else 0.10
        assert abs(p.error) <= tol, (p.size_bytes, p.predicted_gbyte_s, p.published_gbyte_s)


def test_maintainer_statements_within_10pct() -> None:
    points = {p.case: p for p in maintainer_points()}
    for case in ("h100_nvlink_ring", "h100_nvlink_nvls", "ndr_per_nic", "hdr_per_nic", "hdr_3node_4nic"):
        assert abs(points[case].error) <= 0.10, points[case]


def _curve(name: str, gpu: str) -> list[tuple[float, float, float]]:
    """(size, predicted, published) busbw of an 8-GPU NVLink4 node's all_reduce curve in the data file."""
    entry = yaml.safe_load(DATA.read_text())[name]
    c = node_cluster(name, gpu, "nvlink4", 1, 8, 400)
    out = []
    for key, published in entry["busbw_gbyte_s_by_size"].items():
        size = units.parse_size(key)
        out.append((size, predict(c, "all_reduce", size).busbw_bytes_s / units.GB, float(published)))
    return out


@pytest.mark.parametrize(("name", "gpu"), [("h100_node_all_reduce", "h100-sxm"), ("h200_node_all_reduce", "h200")])
def test_nvlink4_node_mid_sizes_within_10pct(name: str, gpu: str) -> None:
    """Azure ND H100 v5 / ND H200 v5 (NCCL 2.18.5 / 2.20.5): 32-256 MiB within 10%, 512 MiB-8 GiB within 5%.

    The H100 curve's 512 MiB -> 1 GiB step and its 8 GiB point set the two NVLS constants (constants.py);
    every other point, and the whole H200 curve, is a check.
    """
    for size, predicted, published in _curve(name, gpu):
        if 32 * units.MiB <= size <= 256 * units.MiB:
            assert abs(predicted / published - 1) <= 0.10, (size, predicted, published)
        if size >= 512 * units.MiB:
            assert abs(predicted / published - 1) <= 0.05, (size, predicted, published)


def _gb200(racks: int) -> Cluster:
    return cluster_from_mapping({
        "name": "gb200", "nodes": 18 * racks, "gpus_per_node": 4, "gpu": "gb200",
        "scale_up": {"link": "nvlink5", "domain_gpus": 72},
        "nics": {"compute": {"per_node": 4, "speed_gbit_s": 400}},
        "fabric": {"transport": "infiniband", "topology": "rail-optimized", "tiers": 2},
    }, "gb200")


def test_gb200_nvl72_rack_within_10pct() -> None:
    """coreweave/nccl-tests README (NCCL 2.26.2), one NVL72 rack, 72 ranks: NVLS from NCCL's own Blackwell
    efficiency (tuning.cc nvlsEfficiency 0.74 vs Hopper 0.85), nothing fitted to GB200."""
    published = yaml.safe_load(DATA.read_text())["gb200_nvl72_all_reduce"]["racks_1"]
    c = _gb200(1)
    for key, value in published.items():
        p = predict(c, "all_reduce", units.parse_size(key))
        assert p.algorithm == "nvls"
        assert abs(p.busbw_bytes_s / units.GB / value - 1) <= 0.10, (key, p.busbw_bytes_s / units.GB, value)


def test_gb200_more_racks_are_slower_than_one() -> None:
    """Published: 681 GB/s at 1 GiB in one rack, 596 over 2 racks, 219 over 20 (coreweave/nccl-tests). The
    model's NVLS_TREE pays the tree's latency and fill over the network, so busbw falls with racks (it is
    still too optimistic across racks: see docs/collectives.md)."""
    one, two, four = (predict(_gb200(r), "all_reduce", units.GiB).busbw_bytes_s for r in (1, 2, 4))
    assert predict(_gb200(4), "all_reduce", units.GiB).algorithm == "nvls_tree"
    assert one > two > four
