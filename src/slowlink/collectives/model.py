"""``predict``: the time of one collective on a cluster, with the algorithm and protocol NCCL would pick.

For each algorithm + protocol that can run, time = latency + bytes / bandwidth (+ pipeline fill); the
least time wins (NCCL ``ncclTopoGetAlgoInfo``). A cluster with a calibrated profile (``calibration:``)
uses its measured alpha-beta fit instead (``calibration.py``) unless an algorithm or protocol is forced.
algbw = size / time and busbw = algbw x the op's nccl-tests factor (doc/PERFORMANCE.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slowlink import units
from slowlink.collectives import algorithms as algo
from slowlink.collectives.communicator import Group, with_crossing
from slowlink.collectives.constants import (
    ALGORITHMS,
    EXPLICIT_ALGORITHMS,
    P2P_LL_THRESHOLD_BYTES,
    P2P_PROTOCOLS,
    PROTOCOLS,
)
from slowlink.collectives.links import Links, resolve
from slowlink.collectives.ops import (
    ALGORITHM_OPS,
    P2P,
    busbw_factor,
    check_algorithm_applies,
    check_op,
    check_protocol_applies,
    p2p_bytes_per_peer,
    p2p_protocol,
)
from slowlink.errors import SpecError
from slowlink.spec.cluster import Cluster

__all__ = ["Group", "Prediction", "default_group", "predict"]

# The traffic pattern each algorithm's network part follows (its crossings: communicator.py).
# NVLS inside one domain crosses no network. PAT's log-distance exchanges are priced as the ring's crossings,
# an approximation that undercounts the far steps (they carry the smaller pieces).
PATTERN = {"ring": "ring", "tree": "tree", "nvls": "tree", "nvls_tree": "tree", "pat": "ring",
           "hierarchical": "ring", P2P: "a2a"}


def pattern_of(algorithm: str, op: str) -> str:
    if op == "send_recv":
        return "p2p"
    return PATTERN.get(algorithm, "ring")


@dataclass(frozen=True)
class Prediction:
    op: str
    size_bytes: float
    ranks: int
    time_s: float
    algbw_bytes_s: float
    busbw_bytes_s: float
    algorithm: str
    protocol: str
    bottleneck: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "op": self.op, "size_bytes": self.size_bytes, "ranks": self.ranks, "time_s": self.time_s,
            "algbw_gbyte_s": self.algbw_bytes_s / units.GB, "busbw_gbyte_s": self.busbw_bytes_s / units.GB,
            "algorithm": self.algorithm, "protocol": self.protocol, "bottleneck": self.bottleneck,
            "reason": self.reason,
        }


def check_group(cluster: Cluster, group: Group) -> None:
    """Reject a communicator the cluster cannot hold, naming the field, value and rule."""
    g = cluster.gpus_per_node
    if group.ranks < 1:
        raise SpecError(f"ranks ({group.ranks}) must be >= 1")
    if group.ranks > cluster.gpus:
        raise SpecError(f"ranks ({group.ranks}) must be <= the cluster's GPUs ({cluster.nodes} x {g} = "
                        f"{cluster.gpus})")
    if not 1 <= group.ranks_per_node <= g:
        raise SpecError(f"ranks_per_node ({group.ranks_per_node}) must be between 1 and gpus_per_node ({g})")
    if group.groups_per_node < 1 or group.groups_per_node * group.ranks_per_node > g:
        raise SpecError(f"groups_per_node ({group.groups_per_node}) x ranks_per_node "
                        f"({group.ranks_per_node}) must be between 1 and gpus_per_node ({g})")
    nodes = -(-group.ranks // group.ranks_per_node)
    if nodes > cluster.nodes:
        raise SpecError(f"ranks ({group.ranks}) at {group.ranks_per_node} per node need {nodes} nodes; "
                        f"the cluster has {cluster.nodes}")


def default_group(cluster: Cluster, ranks: int | None = None) -> Group:
    """Every GPU (or the first ``ranks``), block placement: full nodes first."""
    n = cluster.gpus if ranks is None else ranks
    return Group(ranks=n, ranks_per_node=min(n, cluster.gpus_per_node) if n >= 1 else 1)


def candidates(cluster: Cluster, links: Links, op: str, size: float,
               algorithms: tuple[str, ...], protocols: tuple[str, ...]) -> list[algo.Candidate]:
    """Every algorithm x protocol that can run this op here.

    The default pick considers NCCL's algorithms only (constants.ALGORITHMS); ``hierarchical`` (not an
    NCCL algorithm) runs only when asked for by name.
    """
    arch = cluster.gpu.arch
    out: list[algo.Candidate | None] = []
    if links.domains > 1 and not cluster.fabric.transport.rdma:
        # NCCL enables LL128 only with NVLink inside and GPUDirect RDMA between nodes (tuning.cc).
        protocols = tuple(p for p in protocols if p != "LL128") or protocols
    if op not in ALGORITHM_OPS:  # point-to-point: no tuning-model pick (constants.P2P_PROTOCOLS)
        if len(protocols) == 1:  # forced, as NCCL_P2P_LL_THRESHOLD set to 0 or above the size would; never LL128
            protocols = tuple(p for p in protocols if p in P2P_PROTOCOLS)
        else:  # NCCL's own: LL up to P2P_LL_THRESHOLD per peer, Simple above
            protocols = (p2p_protocol(p2p_bytes_per_peer(op, size, links.ranks)),)
    ring_l, tree_l = links.for_pattern("ring"), links.for_pattern("tree")
    sharp, line = cluster.scale_up.sharp, cluster.scale_up.bw_bytes_s
    channels = algo.nvls_channels(arch, cluster.scale_up.domain_gpus > cluster.gpus_per_node)
    heads = algo.nvls_tree_heads(links.ranks_per_domain, links.domain_nics)
    for p in protocols:
        if op == "all_to_all":
            out.append(algo.all_to_all(links.for_pattern("a2a"), size, p, arch))
            continue
        if op == "send_recv":
            out.append(algo.send_recv(links.for_pattern("p2p"), size, p, arch, cluster.compute_nics.per_node))
            continue
        if "ring" in algorithms:
            out.append(algo.ring(ring_l, op, size, p, arch))
        if "tree" in algorithms:
            out.append(algo.tree(tree_l, op, size, p, arch))
        if "nvls" in algorithms and sharp:
            out.append(algo.nvls(links, op, size, p, line, arch, channels))
        if "nvls_tree" in algorithms and sharp:
            out.append(algo.nvls_tree(tree_l, op, size, p, line, arch, channels, heads))
        if "pat" in algorithms:
            out.append(algo.pat(ring_l, op, size, p, arch))
        if "hierarchical" in algorithms:
            out.append(algo.hierarchical(ring_l, op, size, p, arch))
    return [x for x in out if x is not None]


def bottleneck_name(cluster: Cluster, links: Links, where: str) -> str:
    """The link that limits the bandwidth term, in words."""
    if where == "scale-up":
        return f"scale-up {links.scale_up_name}"
    name = f"NIC {links.net_name}"
    x = links.crossed
    if links.degraded.factor > max(1.0, x.factor):
        return f"degraded {links.degraded.part} (on {name})"
    if x.stage is not None:
        name = f"fabric tier {x.stage} ({x.what}, {x.ratio:g}:1) above {name}"
    if links.degraded:
        name += f" with degraded {links.degraded.part}"
    return name


def _reason(best: algo.Candidate, links: Links, forced: bool = False) -> str:
    share = best.lat_s / best.time_s if best.time_s > 0 else 0.0
    bound = "latency-bound" if share > 0.5 else "bandwidth-bound"
    extra = ""
    x = links.crossed
    if links.domains > 1 and x.stage is not None:
        extra += (f"; the {x.what} (tier {x.stage}, {x.ratio:g}:1) carry its crossing traffic "
                  f"{x.factor:.2f}x slower than its NICs")
    if links.domains > 1 and links.degraded:
        pen = links.degraded
        extra += f"; degraded {pen.part}: network {pen.factor:.2f}x slower" if pen.factor > 1 else \
            f"; degraded {pen.part}"
        if pen.extra_hop_lat_s > 0:
            extra += f", +{pen.extra_hop_lat_s * 1e6:.0f} us per network hop"
    if links.domains > 1 and links.tail_penalty > 0:
        extra += f"; untuned transport loses {links.tail_penalty:.0%} to tail latency"
    if best.algorithm == P2P:
        pick = ("as forced (P2P_LL_THRESHOLD)" if forced else
                f"as NCCL runs p2p ({P2P_PROTOCOLS[0]} up to {P2P_LL_THRESHOLD_BYTES} B per peer, "
                f"{P2P_PROTOCOLS[1]} above)")
    else:
        pick = "as forced (NCCL_ALGO/NCCL_PROTO)" if forced else "is fastest"
    return (f"{best.algorithm}/{best.protocol} {pick}: {bound} ({share:.0%} latency), "
            f"{links.ranks} ranks in {links.domains} scale-up domain(s){extra}")


def _choices(name: str, value: str | None, known: tuple[str, ...]) -> tuple[str, ...]:
    if value is None:
        return known
    if value not in known:
        raise SpecError(f"{name} ({value!r}) is not one of {', '.join(known)}")
    return (value,)


def _calibrated(path: Path, links: Links, op: str, size_bytes: float) -> Prediction | None:
    """The calibrated profile's fit for this op and scope (see calibration.py), or None if it has none."""
    from slowlink.collectives.calibration import calibrated_time_s, load_profile  # only calibrated clusters

    scope = "network" if links.domains > 1 else "scale-up"
    fit = load_profile(path).fit_for(op, scope)
    if fit is None:
        return None
    time_s, lat_s = calibrated_time_s(fit, op, size_bytes, links.ranks)
    algbw = size_bytes / time_s
    where = f"scale-up {links.scale_up_name}" if scope == "scale-up" else f"NIC {links.net_name}"
    share = lat_s / time_s
    source = "" if fit.op == op else f" (from the {fit.op} fit)"
    reason = (f"calibrated {fit.backend} profile {path.name}{source}: "
              f"{'latency' if share > 0.5 else 'bandwidth'}-bound ({share:.0%} latency), "
              f"{fit.hop_latency_s / units.US:.1f} us per step, busbw {fit.busbw_bytes_s / units.GB:.3f} GB/s")
    return Prediction(op=op, size_bytes=size_bytes, ranks=links.ranks, time_s=time_s, algbw_bytes_s=algbw,
                      busbw_bytes_s=algbw * busbw_factor(op, links.ranks), algorithm="calibrated",
                      protocol=fit.backend, bottleneck=where, reason=reason)


def cannot_run(cluster: Cluster, links: Links, op: str, size: float, algorithm: str | None,
               protocol: str | None) -> str:
    """Why the asked algorithm/protocol has no candidate here, and which ones would run."""
    asked = ", ".join(f"{k} ({v!r})" for k, v in (("algorithm", algorithm), ("protocol", protocol)) if v)
    why = ""
    if algorithm in ("nvls", "nvls_tree") and not cluster.scale_up.sharp:
        why = (f": scale-up {cluster.scale_up.link.name} has no NVLink SHARP (NCCL's NVLS needs an NVSwitch "
               "that reduces)")
    elif algorithm == "nvls" and links.domains > 1:
        why = (f": nvls runs inside one NVLink domain and these ranks span {links.domains} (nvls_tree crosses "
               "them)")
    can = sorted({f"{x.algorithm}/{x.protocol}" for x in candidates(cluster, links, op, size,
                                                                      ALGORITHMS + EXPLICIT_ALGORITHMS, PROTOCOLS)})
    return f"{asked} cannot run {op} on {links.ranks} ranks here{why}; these can: {', '.join(can) or 'none'}"


def predict(cluster: Cluster, op: str, size_bytes: float, group: Group | None = None,
            *, algorithm: str | None = None, protocol: str | None = None) -> Prediction:
    """Predict one collective. ``size_bytes`` follows nccl-tests (see ``ops``); ``group`` None = all GPUs."""
    check_op(op)
    check_algorithm_applies(op, algorithm)
    check_protocol_applies(op, protocol)
    if not size_bytes >= 0:
        raise SpecError(f"size_bytes ({size_bytes!r}) must be >= 0")
    grp = group if group is not None else default_group(cluster)
    check_group(cluster, grp)
    algs = _choices("algorithm", algorithm, ALGORITHMS + EXPLICIT_ALGORITHMS) if algorithm else ALGORITHMS
    protos = _choices("protocol", protocol, PROTOCOLS)
    if grp.ranks > 1:
        grp = with_crossing(cluster, op, grp)
    links = resolve(cluster, grp)
    if grp.ranks == 1 or size_bytes == 0:
        return Prediction(op, size_bytes, grp.ranks, 0.0, 0.0, 0.0, algs[0], protos[-1],
                          "none", "nothing to move: one rank or zero bytes")
    if cluster.calibration is not None and algorithm is None and protocol is None:
        measured = _calibrated(cluster.calibration, links, op, size_bytes)
        if measured is not None:
            return measured
    cands = candidates(cluster, links, op, size_bytes, algs, protos)
    if not cands:
        raise SpecError(cannot_run(cluster, links, op, size_bytes, algorithm, protocol))
    best = min(cands, key=lambda x: x.time_s)
    links = links.for_pattern(pattern_of(best.algorithm, op))
    algbw = size_bytes / best.time_s
    return Prediction(
        op=op, size_bytes=size_bytes, ranks=grp.ranks, time_s=best.time_s, algbw_bytes_s=algbw,
        busbw_bytes_s=algbw * busbw_factor(op, grp.ranks), algorithm=best.algorithm,
        protocol=best.protocol, bottleneck=bottleneck_name(cluster, links, best.bottleneck),
        reason=_reason(best, links, forced=algorithm is not None or protocol is not None),
    )
