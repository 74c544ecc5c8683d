from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from slowlink.spec.cluster import Cluster, cluster_from_mapping


def make(nodes: int = 8, gpu: str = "h100-sxm", link: str = "nvlink4", nics: int = 1, speed: float = 400,
         transport: str = "infiniband", lossless: bool = True, **fabric: Any) -> Cluster:
    """A cluster from the catalog, HGX-style 8 GPUs per node."""
    return cluster_from_mapping({
        "name": "t", "nodes": nodes, "gpus_per_node": 8, "gpu": gpu,
        "scale_up": {"link": link, "domain_gpus": 8},
        "nics": {"compute": {"per_node": nics, "speed_gbit_s": speed}},
        "fabric": {"transport": transport, "lossless": lossless, **fabric},
    })


@pytest.fixture
def ref() -> Cluster:
    return make()


@pytest.fixture(name="make")
def make_fixture() -> Callable[..., Cluster]:
    """The cluster factory, for tests that vary the hardware."""
    return make
