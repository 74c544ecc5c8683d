"""Golden tests: the model against published nccl-tests numbers (calibration/collective_bandwidth.yaml).

Sources: Azure/AI-benchmarking-guide ND A100 v4 (NCCL 2.18.5); NVIDIA/nccl-tests issues 212, 290, 119.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from slowlink import units
from slowlink.collectives.validate import a100_curve, maintainer_points

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
