"""Specs: the files users write (cluster, workload, scenario), validated and turned into SI dataclasses."""

from slowlink.spec.cluster import (
    Cluster,
    ClusterSpec,
    Fabric,
    NicGroup,
    ScaleUp,
    Storage,
    cluster_from_mapping,
    load_cluster,
)

__all__ = [
    "Cluster",
    "ClusterSpec",
    "Fabric",
    "NicGroup",
    "ScaleUp",
    "Storage",
    "cluster_from_mapping",
    "load_cluster",
]
