"""Protocol factors: what LL, LL128 and Simple keep of a link's bandwidth (NCCL tuning.cc refinements)."""

from __future__ import annotations

from slowlink import units
from slowlink.collectives import constants as c


def ll_cap_bytes_s(arch: str) -> float:
    """NCCL llMaxBws: the most LL can move per GPU, by generation (GB/s in NCCL, bytes/s here)."""
    return c.LL_MAX_GBYTE_S.get(arch, c.LL_MAX_DEFAULT_GBYTE_S) * units.GB


def ring_bw(bus_bw: float, protocol: str, op: str, multi_domain: bool, one_per_domain: bool,
            arch: str) -> float:
    """Ring bus bandwidth under a protocol.

    LL: bus x 1/4 (multi-node, all_reduce or reduce) else 1/3, capped at llMaxBws;
    LL128: bus x 0.92 (0.7 with one rank per node); Simple: bus. Source: NCCL tuning.cc.
    """
    if protocol == "LL":
        f = c.RING_LL_FACTOR_ALLREDUCE if (multi_domain or op in ("all_reduce", "reduce")) \
            else c.RING_LL_FACTOR_OTHER
        return min(bus_bw * f, ll_cap_bytes_s(arch))
    if protocol == "LL128":
        return bus_bw * (c.LL128_FACTOR_ONE_PER_NODE if one_per_domain else c.LL128_FACTOR)
    return bus_bw


def tree_bw(bus_bw: float, protocol: str, multi_domain: bool, arch: str) -> float:
    """Tree bus bandwidth: bus x TREE_BW_FACTOR (0.92), then LL x 1/3.8 (capped) or LL128 x 0.915 (7/9 on one node)."""
    bw = bus_bw * c.TREE_BW_FACTOR
    if protocol == "LL":
        return min(bw * c.TREE_LL_FACTOR, ll_cap_bytes_s(arch))
    if protocol == "LL128":
        return bw * (c.TREE_LL128_FACTOR_MULTI_NODE if multi_domain else c.TREE_LL128_FACTOR_ONE_NODE)
    return bw


def hop_lat_s(hw: str, algorithm: str, protocol: str, scale: float = 1.0) -> float:
    """NCCL hwLat for one hop on ``hw`` ('nvlink', 'pci', 'net'), seconds; ``scale`` for slow transports."""
    return c.HW_LAT_US[hw][algorithm][protocol] * scale * c.US


def base_lat_s(algorithm: str, protocol: str) -> float:
    """NCCL baseLat, seconds."""
    return c.BASE_LAT_US[algorithm][protocol] * c.US
