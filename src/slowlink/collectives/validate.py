"""``slowlink validate collectives``: the model against published nccl-tests numbers.

The published points live in ``data/collective_bandwidth.yaml`` (a copy of the project's calibration
file); the clusters they were measured on are built here from the catalog. Nothing is fitted per case.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

from slowlink import units
from slowlink.collectives.model import Group, predict
from slowlink.fileio import read_mapping
from slowlink.spec.cluster import Cluster, cluster_from_mapping

LARGE = 8 * units.GiB  # "peak" statements are checked at nccl-tests' usual top size


def node_cluster(name: str, gpu: str, link: str, nodes: int, nics: int, speed_gbit_s: float,
                 gpus_per_node: int = 8, domain_gpus: int = 8, nvls: bool = True) -> Cluster:
    """An HGX-style cluster of ``nodes`` x 8 GPUs (or an NVL rack's trays) on InfiniBand, non-blocking;
    ``nvls=False``: the run had NCCL_NVLS_ENABLE=0 (no NVLS / NVLS-tree, whatever the switch can do)."""
    scale_up: dict[str, Any] = {"link": link, "domain_gpus": domain_gpus}
    if not nvls:
        scale_up["sharp"] = False
    return cluster_from_mapping({
        "name": name, "nodes": nodes, "gpus_per_node": gpus_per_node, "gpu": gpu,
        "scale_up": scale_up,
        "nics": {"compute": {"per_node": nics, "speed_gbit_s": speed_gbit_s}},
        "fabric": {"transport": "infiniband", "tiers": 2, "oversubscription": 1},
    }, name)


@dataclass(frozen=True)
class Point:
    case: str
    size_bytes: float
    predicted_gbyte_s: float
    published_gbyte_s: float
    source: str

    @property
    def error(self) -> float:
        """Signed relative error, (predicted - published) / published."""
        return (self.predicted_gbyte_s - self.published_gbyte_s) / self.published_gbyte_s

    def to_json(self) -> dict[str, Any]:
        return {"case": self.case, "size_bytes": self.size_bytes, "predicted_gbyte_s": self.predicted_gbyte_s,
                "published_gbyte_s": self.published_gbyte_s, "error_pct": 100 * self.error,
                "source": self.source}


def load_published() -> dict[str, Any]:
    """The packaged calibration file."""
    ref = resources.files("slowlink.collectives") / "data" / "collective_bandwidth.yaml"
    with resources.as_file(ref) as path:
        return read_mapping(path)


def _busbw(cluster: Cluster, size: float, group: Group | None = None, **kw: str) -> float:
    return predict(cluster, "all_reduce", size, group, **kw).busbw_bytes_s / units.GB


def a100_curve(data: dict[str, Any]) -> list[Point]:
    """Azure ND A100 v4: 8 x A100 NVLink3, all_reduce busbw by size."""
    entry = data["a100_node_all_reduce"]
    c = node_cluster("a100-node", "a100-80gb", "nvlink3", 1, 8, 200)
    return [Point("a100_node_all_reduce", units.parse_size(k), _busbw(c, units.parse_size(k)), float(v),
                  entry["source"]) for k, v in entry["busbw_gbyte_s_by_size"].items()]


def _curve(case: str, cluster: Cluster, by_size: dict[str, float], source: str) -> list[Point]:
    return [Point(case, units.parse_size(k), _busbw(cluster, units.parse_size(k)), float(v), source)
            for k, v in by_size.items()]


def node_curves(data: dict[str, Any]) -> list[Point]:
    """Azure ND H100 v5 and ND H200 v5: one node, 8 GPUs on NVLink4 with NVLS, all_reduce busbw by size."""
    h100 = node_cluster("h100-node", "h100-sxm", "nvlink4", 1, 8, 400)
    h200 = node_cluster("h200-node", "h200", "nvlink4", 1, 8, 400)
    return [p for key, c in (("h100_node_all_reduce", h100), ("h200_node_all_reduce", h200))
            for p in _curve(key, c, data[key]["busbw_gbyte_s_by_size"], data[key]["source"])]


def gb200_curves(data: dict[str, Any]) -> list[Point]:
    """GB200 NVL72 racks (18 trays x 4 GPUs, 4 x 400G per tray) at 1, 2 and 20 racks (coreweave), with the
    NCCL environment of the source's jobs (``nccl_env``: NCCL_NVLS_ENABLE=0 there, so ring and tree)."""
    entry = data["gb200_nvl72_all_reduce"]
    nvls = int(entry.get("nccl_env", {}).get("NCCL_NVLS_ENABLE", 1)) != 0
    out = []
    for racks in (1, 2, 20):
        c = node_cluster(f"gb200-{racks}rack", "gb200", "nvlink5", 18 * racks, 4, 400, gpus_per_node=4,
                         domain_gpus=72, nvls=nvls)
        out += _curve(f"gb200_nvl72_{racks}rack", c, entry[f"racks_{racks}"], entry["source"])
    return out


def multi_node_curves(data: dict[str, Any]) -> list[Point]:
    """HGX nodes with 8 x 400G InfiniBand: 8 x H100 (the job manifest enables SHARP, i.e. NCCL CollNet,
    which slowlink does not model), 2 x H100 and 2 x B200 (coreweave/nccl-tests)."""
    shapes = [("h100_8node_sharp", "h100-sxm", "nvlink4", 8), ("h100_2node", "h100-sxm", "nvlink4", 2),
              ("b200_2node", "b200", "nvlink5", 2)]
    out = []
    for (case, gpu, link, nodes), entry in zip(shapes, data["multi_node_all_reduce"], strict=True):
        c = node_cluster(case, gpu, link, nodes, 8, 400)
        out += _curve(case, c, entry["busbw_gbyte_s_by_size"], entry["source"])
    return out


def maintainer_points() -> list[Point]:
    """The maintainers' statements (nccl-tests issues 212, 290, 119), at 8 GiB.

    H100 ring 370 and NVLS 480 busbw on one NVLink4 node; NDR 47 (46-48) and HDR 24 busbw per NIC: two
    ranks, one per node, each node with one NIC; 3 nodes x 8 A100 x 4 HDR NICs, 24 ranks: 96.
    """
    h100 = node_cluster("h100-node", "h100-sxm", "nvlink4", 1, 8, 400)
    ndr = node_cluster("ndr-2node", "h100-sxm", "nvlink4", 2, 1, 400)
    hdr = node_cluster("hdr-2node", "a100-80gb", "nvlink3", 2, 1, 200)
    hdr3 = node_cluster("hdr-3node", "a100-80gb", "nvlink3", 3, 4, 200)
    pair = Group(ranks=2, ranks_per_node=1)
    return [
        Point("h100_nvlink_ring", LARGE, _busbw(h100, LARGE, algorithm="ring"), 370.0, "nccl-tests #212"),
        Point("h100_nvlink_nvls", LARGE, _busbw(h100, LARGE, algorithm="nvls"), 480.0, "nccl-tests #212"),
        Point("ndr_per_nic", LARGE, _busbw(ndr, LARGE, pair), 47.0, "nccl-tests #290"),
        Point("hdr_per_nic", LARGE, _busbw(hdr, LARGE, pair), 24.0, "nccl-tests #119"),
        Point("hdr_3node_4nic", LARGE, _busbw(hdr3, LARGE), 96.0, "nccl-tests #119"),
    ]


def two_node_points() -> list[Point]:
    """Two HGX A100 nodes, 8 GPUs and 4 x 200G HDR each, 16 ranks: all_reduce busbw 86 GB/s, the top of an
    all_reduce_perf sweep to 4 GiB (NVIDIA/nccl-tests issue 175, the same run as NVIDIA/nccl issue 1048; a user
    report, checked at its top size). NCCL runs the ring there: its two-node tree tops out at 4 channels x 23.6
    GB/s (constants.TREE_PER_CHANNEL_MAX_GBYTE_S)."""
    c = node_cluster("a100-2node-4hdr", "a100-80gb", "nvlink3", 2, 4, 200)
    return [Point("a100_2node_4hdr", 4 * units.GiB, _busbw(c, 4 * units.GiB), 86.0, "nccl-tests #175")]


def validate() -> list[Point]:
    """Every published point with the model's prediction."""
    data = load_published()
    return (a100_curve(data) + node_curves(data) + gb200_curves(data) + multi_node_curves(data)
            + maintainer_points() + two_node_points())
