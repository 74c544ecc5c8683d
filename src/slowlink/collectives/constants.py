"""Every constant of the collective model, with its source. One set for every cluster: no per-case fits.

Latencies are NCCL's own (``src/graph/tuning.cc``, NCCL 2.18-2.21: ``baseLat`` and ``hwLat``), in
microseconds as there, converted to seconds where they are used. Bandwidth factors are NCCL's model
refinements from the same file. The two efficiencies NCCL does not state are derived from maintainer
statements (``calibration/collective_bandwidth.yaml``) and used for every NVLink generation alike.
"""

from __future__ import annotations

from slowlink import units
from slowlink.catalog.scale_up import SCALE_UP_EFFICIENCY as _SCALE_UP_EFFICIENCY

ALGORITHMS = ("ring", "tree", "nvls", "hierarchical")
PROTOCOLS = ("LL", "LL128", "Simple")

# NCCL baseLat[algorithm][protocol], microseconds: launch + protocol set-up cost of one collective.
BASE_LAT_US: dict[str, dict[str, float]] = {
    "tree": {"LL": 6.8, "LL128": 14.0, "Simple": 0.0},
    "ring": {"LL": 6.6, "LL128": 14.0, "Simple": 8.4},
    "nvls": {"LL": 0.0, "LL128": 0.0, "Simple": 0.0},
}

# NCCL hwLat[hw][algorithm][protocol], microseconds per hop (NVLink / PCI / network, Simple = with a chunk).
HW_LAT_US: dict[str, dict[str, dict[str, float]]] = {
    "nvlink": {"tree": {"LL": 0.6, "LL128": 1.25, "Simple": 4.0},
               "ring": {"LL": 0.6, "LL128": 1.9, "Simple": 3.4},
               "nvls": {"LL": 0.0, "LL128": 0.0, "Simple": 25.0}},
    "pci": {"tree": {"LL": 1.0, "LL128": 1.9, "Simple": 6.0},
            "ring": {"LL": 1.0, "LL128": 2.5, "Simple": 5.7},
            "nvls": {"LL": 0.0, "LL128": 0.0, "Simple": 0.0}},
    "net": {"tree": {"LL": 5.0, "LL128": 8.5, "Simple": 14.0},
            "ring": {"LL": 2.7, "LL128": 4.0, "Simple": 14.0},
            "nvls": {"LL": 0.0, "LL128": 0.0, "Simple": 18.0}},
}
# The NET row above is NCCL's for InfiniBand/RoCE with GPUDirect RDMA; the catalog's transport
# latency_us is that same Simple figure (14 us), so a transport's row is scaled by latency_us / 14.
NET_REFERENCE_LAT_US = 14.0

# NCCL: a multi-node Simple ring all_reduce pays its latency x 1.4 on Ampere and later ("plateau effect").
RING_SIMPLE_PLATEAU = 1.4
# NCCL: LL sends 8 bytes of flag per 8 bytes of data and is capped; factor on bus bandwidth.
RING_LL_FACTOR_ALLREDUCE = 1.0 / 4.0     # multi-node, all_reduce or reduce
RING_LL_FACTOR_OTHER = 1.0 / 3.0
TREE_LL_FACTOR = 1.0 / 3.8
# NCCL: LL128 moves 120 useful bytes of every 128; 0.7 when one rank per node shares its NIC both ways.
LL128_FACTOR = 0.92
LL128_FACTOR_ONE_PER_NODE = 0.7
TREE_LL128_FACTOR_MULTI_NODE = 0.915
TREE_LL128_FACTOR_ONE_NODE = 7.0 / 9.0
# NCCL: tree bandwidth is 0.9 of the link (busBw * .9) and algbw = busBw * 0.5 for tree and NVLS-tree.
TREE_BW_FACTOR = 0.9
TREE_ALGBW_RATIO = 0.5
# NCCL llMaxBws, GB/s per GPU: the LL protocol cannot exceed this, by GPU generation (one node).
LL_MAX_GBYTE_S: dict[str, float] = {"volta": 39.0, "ampere": 87.7, "hopper": 141.0, "blackwell": 141.0}
LL_MAX_DEFAULT_GBYTE_S = 87.7

# NCCL-achievable fraction of a scale-up link: one fact, kept with the scale-up catalog (its source there).
SCALE_UP_EFFICIENCY = _SCALE_UP_EFFICIENCY

# NVLS (NVLink SHARP) all_reduce algbw as a fraction of the per-GPU line rate: the maintainer's ~275 GB/s
# algbw (~480 busbw) on H100 NVLink4 of 450 (nccl-tests issue 212). The switch reduces, so each GPU sends
# and receives its buffer about once: algbw, not busbw, is what the link limits.
NVLS_ALGBW_EFFICIENCY = 275.0 / 450.0

# Pipeline granularity: NCCL moves a ring step in chunks; NCCL's tuning comment charges a Simple hop "the
# latency of a 256 kB chunk", and rings run about 8 channels in parallel: 8 x 256 kB in flight per rank.
# A step cannot finish before its last chunk has crossed, so every step after the first costs one piece
# (min(step bytes, window)) at the ring's bandwidth: the mid-size dip of every published busbw curve.
PIPELINE_WINDOW_BYTES = 8 * 256 * units.KiB

US = units.US
