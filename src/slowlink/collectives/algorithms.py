"""Candidate algorithms: each returns the time of one algorithm + protocol, or None where it cannot run.

Time follows NCCL's ``ncclTopoGetAlgoTime``: latency + bytes / bandwidth, plus what NCCL's chunking adds:
a fixed GPU-side cost per slice and step on rings (:func:`ring_slice_cost_s`, no pipeline fill: every link
of a ring is busy from the first step) and the pipeline fill of chains and trees, whose links wait for the
first chunk (:func:`chain_fill_s`, :func:`tree_fill_s`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from slowlink import units
from slowlink.collectives import constants as c
from slowlink.collectives import protocols as proto
from slowlink.collectives.links import Links
from slowlink.collectives.ops import P2P, busbw_factor, inter_steps, ring_steps


@dataclass(frozen=True)
class Candidate:
    algorithm: str
    protocol: str
    time_s: float
    lat_s: float
    bw_bytes_s: float       # the bandwidth the bytes term ran at
    bottleneck: str         # 'scale-up' or 'network'


def bus_link(links: Links, net_factor: float = 1.0) -> tuple[float, str]:
    """The ring's bus bandwidth and the link that sets it: min(scale-up if >1 rank per domain, network x
    ``net_factor``; a tree passes :func:`tree_net_factor`)."""
    net = links.net_bw_bytes_s * net_factor
    if links.domains <= 1:
        return links.intra_bw_bytes_s, "scale-up"
    if links.ranks_per_domain > 1 and links.intra_bw_bytes_s < net:
        return links.intra_bw_bytes_s, "scale-up"
    return net, "network"


def tree_net_factor(domains: int) -> float:
    """How much more of the network a tree (and NVLS-tree) over ``domains`` domains gets than NCCL's ``busBw x
    0.5`` allows for: TREE_TWO_DOMAIN_NET_FACTOR on two (a chain of two: each NIC carries the data once each
    way, not twice; tuning.cc ncclTopoTuneModel, nNodes <= 2), else 1."""
    return c.TREE_TWO_DOMAIN_NET_FACTOR if domains == 2 else 1.0


def two_domain_tree_cap_bytes_s(links: Links, arch: str) -> float:
    """The bus bandwidth a plain tree over two domains cannot pass: one channel per NIC of the domain x NCCL's
    two-node per-channel tree ceiling (constants.TREE_PER_CHANNEL_MAX_GBYTE_S); infinite elsewhere."""
    if links.domains != 2 or arch not in c.TREE_PER_CHANNEL_MAX_GBYTE_S:
        return math.inf
    return max(1, links.domain_nics) * c.TREE_PER_CHANNEL_MAX_GBYTE_S[arch][1] * units.GB


def ring_step_wait_s(steps: int, step_bytes: float, bw: float) -> float:
    """Per-step wait of a ring: (steps - 1) x min(step bytes / bw, RING_STEP_WAIT_US).

    Each step after the first waits for data of the previous step; a short step costs its own transfer
    time, a long one at most the fixed cap (see constants.RING_STEP_WAIT_US). A time cap, not a byte window:
    on a slow link it stays microseconds, far below the bytes term.
    """
    return max(0, steps - 1) * min(step_bytes / bw, c.RING_STEP_WAIT_US * c.US)


def chain_fill_s(hops: int, size: float, protocol: str, bw: float) -> float:
    """broadcast / reduce along a chain: the last link starts when the first chunk of every channel has
    crossed hops - 1 links: (hops - 1) x min(size, channels x chunk) / bw. (The ring's measured step wait,
    constants.RING_STEP_WAIT_US, is one NVLink ring's; it is not carried over to chains and trees.) Simple only:
    LL / LL128 forward line by line (see :func:`tree_fill_fraction`)."""
    if protocol != "Simple":
        return 0.0
    loop_bytes = c.CHANNELS * c.CHAIN_CHUNK_BYTES
    return max(0, hops - 1) * min(size, loop_bytes) / bw


def tree_chunk_bytes(size: float, depth: int) -> float:
    """NCCL's Simple tree chunk (enqueue.cc calcCollChunking): 512 KiB, halved while a channel gets fewer
    than 8 / 4 / 1 x depth chunks, down to 128 / 64 / 32 KiB."""
    chunk = c.TREE_CHUNK_BYTES
    for times, floor in c.TREE_CHUNK_HALVING:
        while size / (c.CHANNELS * chunk) < depth * times and chunk > floor:
            chunk /= 2
    return chunk


def tree_fill_s(depth: int, size: float, protocol: str, algbw: float) -> float:
    """A pipelined tree (up then down, 2 x depth hops): the root's last chunk leaves 2 depth - 1 chunk times
    after the first: (2 depth - 1) x min(size, channels x chunk) / algbw (Simple). (No per-chunk step wait:
    see chain_fill_s.)"""
    return tree_fill_fraction(depth, size, protocol) * size / algbw


def tree_fill_fraction(depth: int, size: float, protocol: str) -> float:
    """The tree's fill as a fraction of its bytes term: (2 depth - 1) x min(size, channels x chunk) / size
    (shared with the flow model, which times the bytes and adds this on top).

    Only Simple waits for whole chunks: it forwards a FIFO step once the step's flag is posted. LL and LL128
    carry a flag in every 16-byte / 128-byte line (NCCL's prims_ll.h / prims_ll128.h), so a rank forwards a
    line as soon as it has read it, and the pipeline fills in about one hop latency per hop, which the
    latency term already counts. (Charging LL a 32 KiB step per hop made a forced tree/LL 1 MiB all_reduce
    on 8 nodes 3 ms, 0.7 GB/s busbw.)"""
    if size <= 0 or protocol != "Simple":
        return 0.0
    chunk = tree_chunk_bytes(size, depth)
    return max(0, 2 * depth - 1) * min(size, c.CHANNELS * chunk) / size


def ring(links: Links, op: str, size: float, p: str, arch: str) -> Candidate:
    """Ring: lat = base + (nsteps - ninter) x intra hop + ninter x net hop (x1.4 multi-node Simple AR);
    all_reduce / all_gather / reduce_scatter: time = lat + size x busbw_factor / bw + per-slice cost
    (:func:`ring_slice_cost_s`); broadcast / reduce (a chain): time = lat + size / bw + chain fill."""
    n, d = links.ranks, links.domains
    steps, inter = ring_steps(op, n), inter_steps(op, d)
    bus, where = bus_link(links)
    bw = proto.ring_bw(bus, p, op, d > 1, links.ranks_per_domain < 2, arch)
    intra = proto.hop_lat_s(links.intra_hw, "ring", p)
    net = proto.hop_lat_s("net", "ring", p, links.net_lat_scale)
    lat = proto.base_lat_s("ring", p) + (steps - inter) * intra + inter * net
    if p == "Simple" and d > 1 and op == "all_reduce":
        lat *= c.RING_SIMPLE_PLATEAU
    lat += inter * links.degraded.extra_hop_lat_s  # a delayed node's share of each network hop (degraded.py)
    if op in ("all_reduce", "all_gather", "reduce_scatter"):
        # every rank sends size / n per step, all at once: no link waits for another, no fill. The step wait
        # was measured on one NVLink node only (constants.RING_STEP_WAIT_US); across domains it is not
        # charged: the published 8-node H100 curve leaves room for 0.26-0.39 ms of fixed cost in all, less
        # than NCCL's own latency term already is there (docs/collectives.md).
        wait = ring_step_wait_s(steps, size / n, bw) if d == 1 else 0.0
        t = lat + size * busbw_factor(op, n) / bw + wait
    else:
        t = lat + size / bw + chain_fill_s(steps, size, p, bw)
    return Candidate("ring", p, t, lat, bw, where)


def tree(links: Links, op: str, size: float, p: str, arch: str) -> Candidate | None:
    """Double binary tree across domains, chain inside (all_reduce, > 1 domain).

    lat = base + 2((ranks/domain - 1) x intra hop + log2(domains) x net hop);
    algbw = 0.5 x tree bus bw (NCCL ratio), the network's share x :func:`tree_net_factor` (two domains), the bus
    bandwidth x 0.92 at most :func:`two_domain_tree_cap_bytes_s` (NCCL's per-channel tree ceiling);
    time = lat + size / algbw + the tree's fill (:func:`tree_fill_s`).
    """
    if op != "all_reduce" or links.domains < 2:
        return None
    bus, where = bus_link(links, tree_net_factor(links.domains))
    cap = two_domain_tree_cap_bytes_s(links, arch)
    if bus * c.TREE_BW_FACTOR > cap:  # NCCL: min(busBw x .92, nChannels x perChMaxTreeBw)
        bus, where = cap / c.TREE_BW_FACTOR, "network"
    algbw = proto.tree_bw(bus, p, True, arch) * c.TREE_ALGBW_RATIO
    depth = (links.ranks_per_domain - 1) + int(math.log2(links.domains))
    intra = proto.hop_lat_s(links.intra_hw, "tree", p)
    net = proto.hop_lat_s("net", "tree", p, links.net_lat_scale) + links.degraded.extra_hop_lat_s
    lat = proto.base_lat_s("tree", p) + 2 * ((links.ranks_per_domain - 1) * intra
                                              + int(math.log2(links.domains)) * net)
    t = lat + size / algbw + tree_fill_s(depth, size, p, algbw)
    return Candidate("tree", p, t, lat, algbw, where)


def nvls_chunk_bytes(size: float, ops: int) -> float:
    """NCCL's NVLS chunk (enqueue.cc): 128 KiB, halved to 64 / 32 / 16 KiB below 64 / 8 / 2 x ops x chunk."""
    chunk = c.NVLS_CHUNK_BYTES
    for times, smaller in ((64, 64 * units.KiB), (8, 32 * units.KiB), (2, 16 * units.KiB)):
        if size < times * ops * chunk and chunk > smaller:
            chunk = smaller
    return chunk


def nvls_peak_bw(line_bw: float, arch: str) -> float:
    """Peak NVLS algbw: line x the Hopper fraction x NCCL's nvlsEfficiency(arch) / nvlsEfficiency(hopper)."""
    eff = c.NVLS_EFFICIENCY.get(arch, c.NVLS_EFFICIENCY["hopper"]) / c.NVLS_EFFICIENCY["hopper"]
    return line_bw * c.NVLS_PEAK_LINE_FRACTION_HOPPER * eff


def nvls_transfer(size: float, ranks: int, channels: int, line_bw: float, arch: str) -> tuple[float, float, float]:
    """(bytes term, fill term, bandwidth) of NVLS on one scale-up domain (see constants, NVLS block).

    ops = channels x heads (one head per rank); bw = peak x chunk / (chunk + per-chunk overhead);
    bytes term = size / bw; fill = NVLS_PIPELINE_FILL_LOOPS x min(size, ops x chunk) / bw.
    """
    ops = channels * ranks
    chunk = nvls_chunk_bytes(size, ops)
    bw = nvls_peak_bw(line_bw, arch) * chunk / (chunk + c.NVLS_CHUNK_OVERHEAD_BYTES)
    return size / bw, c.NVLS_PIPELINE_FILL_LOOPS * min(size, ops * chunk) / bw, bw


def nvls_fill_fraction(size: float, ranks_per_domain: int, domains: int, channels: int) -> float:
    """NVLS's (and NVLS-tree's) fills as a fraction of the bytes term, for the flow model, which times the
    bytes itself: NVLS_PIPELINE_FILL_LOOPS x one loop on NVLink, plus one loop per tree level each way on
    the network (the terms of :func:`nvls` and :func:`nvls_tree`, each over its own stage's bytes term)."""
    if size <= 0:
        return 0.0
    ops = channels * ranks_per_domain
    loop = min(size, ops * nvls_chunk_bytes(size, ops))
    levels = max(1, math.ceil(math.log2(domains))) if domains > 1 else 0
    return (c.NVLS_PIPELINE_FILL_LOOPS + 2 * levels) * loop / size


def nvls_channels(arch: str, multi_node_domain: bool) -> int:
    """NCCL's NVLS channel count (nvls.cc): 16 Hopper, 32 Blackwell, 24 on a multi-node NVLink domain."""
    if multi_node_domain and arch == "blackwell":
        return c.NVLS_CHANNELS_MULTI_NODE_DOMAIN
    return c.NVLS_CHANNELS.get(arch, c.NVLS_CHANNELS["hopper"])


def nvls_tree_heads(ranks_per_domain: int, nics_per_domain: int) -> int:
    """NCCL's NVLS graph channels (search.cc): one head per NIC with its own GPU, at most
    min(NVLS_MAX_ARITY, the domain's GPUs of this communicator)."""
    return max(1, min(c.NVLS_MAX_ARITY, ranks_per_domain, nics_per_domain))


def nvls_tree_net_share(ranks_per_domain: int, nics_per_domain: int) -> float:
    """The share of a domain's NICs that NVLS-tree's network traffic crosses: its heads' NICs only, one each.

    NCCL (2.19-2.29) builds the inter-domain trees between head ranks alone (connect.cc connectNvls: treeUp /
    treeDown are set only on the rank that is ``nvlsHeads[h]`` of its node) and a head sends on the NIC the
    NVLS graph paired it with (search.cc getNvlsNetDev), so of a GB200 NVL72 rack's 72 NICs NVLS-tree uses
    :func:`nvls_tree_heads` = 32, and of a GPU's two NICs one (a GPU heads once: ncclTopoSearchRecNet)."""
    return nvls_tree_heads(ranks_per_domain, nics_per_domain) / max(1, nics_per_domain)


def nvls_tree_net_bw(links: Links) -> float:
    """The network bandwidth NVLS-tree's heads get, from ``links`` as the tree pattern sees them
    (:meth:`Links.for_pattern`: all the domain's NICs, divided by the binding stage's or degraded NIC's factor).

    The heads' NICs (:func:`nvls_tree_net_share`) carry the domain's traffic, each 1 / share more of it, while
    the fabric stages carry the same bytes: time = max(NICs / share, stage, degraded NIC), so bandwidth =
    all NICs x share / max(1, stage factor x share, degraded factor). (The stage's load is taken as spread as
    before; the flow model, which places the heads, sees where they sit.)"""
    share = nvls_tree_net_share(links.ranks_per_domain, links.domain_nics)
    f, pen = links.crossed.factor, links.degraded.factor
    return links.net_bw_bytes_s * max(1.0, f, pen) * share / max(1.0, f * share, pen)


def nvls_tree_cap_bytes_s(arch: str, ranks: int, domains: int, heads: int) -> float:
    """The most algbw NCCL's NVLS-tree reaches (NCCL 2.28+ tuning.cc, perChMaxNVLSTreeBws): busBw <= heads x
    the per-channel cap (2 domains: N2, more: N4), algbw = busBw x ranks / (2 (ranks - 1)). Infinite where
    NCCL has no cap (one domain, or a generation without NVLS)."""
    caps = c.NVLS_TREE_PER_CHANNEL_MAX_GBYTE_S.get(arch)
    if caps is None or domains < 2 or ranks < 2:
        return math.inf
    per_channel = caps[0] if domains == 2 else caps[1]
    return heads * per_channel * units.GB * ranks / (2 * (ranks - 1))


def nvls(links: Links, op: str, size: float, p: str, line_bw: float, arch: str,
         channels: int) -> Candidate | None:
    """NVLS (in-switch reduction) all_reduce inside one scale-up domain, Simple only (tuning.cc).

    time = NVLink NVLS hop + bytes term + pipeline fill (:func:`nvls_transfer`).
    """
    if op != "all_reduce" or p != "Simple" or links.ranks_per_domain < 2 or links.domains > 1:
        return None
    bytes_s, fill, bw = nvls_transfer(size, links.ranks_per_domain, channels, line_bw, arch)
    lat = proto.hop_lat_s("nvlink", "nvls", p)
    return Candidate("nvls", p, lat + bytes_s + fill, lat, bw, "scale-up")


def nvls_tree(links: Links, op: str, size: float, p: str, line_bw: float, arch: str,
              channels: int, heads: int) -> Candidate | None:
    """NVLS inside each domain, a tree of domains over the network (NCCL NVLS_TREE), all_reduce, Simple.

    Network algbw = the heads' NICs (:func:`nvls_tree_net_bw`) x 0.9 (tree refinement),
    halved by the double binary tree, x :func:`tree_net_factor` (two domains exchange directly: tuning.cc
    doubles their interBw). The NVLink stage
    runs at the NVLS rate, at most NCCL's per-channel cap over ``heads`` channels (:func:`nvls_tree_cap_bytes_s`).
    The stages pipeline: time = lat + max(NVLS bytes term, size / net algbw) + NVLS fill + a fill of
    one NVLS loop per tree level on the network; lat = NVLS hop + 2 log2(domains) net hops (tuning.cc).
    """
    if op != "all_reduce" or p != "Simple" or links.ranks_per_domain < 2 or links.domains < 2:
        return None
    bytes_s, fill, bw = nvls_transfer(size, links.ranks_per_domain, channels, line_bw, arch)
    cap = nvls_tree_cap_bytes_s(arch, links.ranks, links.domains, heads)
    if cap < bw:
        bytes_s, bw = size / cap, cap
    levels = max(1, math.ceil(math.log2(links.domains)))
    net_bw = nvls_tree_net_bw(links) * c.NVLS_TREE_NET_FACTOR * c.TREE_ALGBW_RATIO * tree_net_factor(links.domains)
    net_s = size / net_bw
    loop = min(size, channels * links.ranks_per_domain * nvls_chunk_bytes(size, channels * links.ranks_per_domain))
    lat = proto.hop_lat_s("nvlink", "nvls_tree", p) + 2 * levels * (proto.hop_lat_s(
        "net", "nvls_tree", p, links.net_lat_scale) + links.degraded.extra_hop_lat_s)
    where = "network" if net_s > bytes_s else "scale-up"
    t = lat + max(bytes_s, net_s) + fill + 2 * levels * loop / net_bw
    return Candidate("nvls_tree", p, t, lat, min(bw, net_bw), where)


def pat(links: Links, op: str, size: float, p: str, arch: str) -> Candidate | None:
    """PAT (NCCL 2.23+): all_gather / reduce_scatter with one rank per domain, Simple only.

    bw = ring bus bw x 0.75; lat = baseLat + log2(domains) x net hop / 3.5 + 2.8 us x ranks (tuning.cc);
    time = lat + size x (n-1)/n / bw.
    """
    if op not in ("all_gather", "reduce_scatter") or p != "Simple" or links.ranks_per_domain != 1 \
            or links.domains < 2:
        return None
    bus, where = bus_link(links)
    bw = proto.ring_bw(bus, p, op, True, True, arch) * c.PAT_BW_FACTOR
    lat = (proto.base_lat_s("pat", p)
           + math.log2(links.domains) * (proto.hop_lat_s("net", "pat", p, links.net_lat_scale) / c.PAT_LOG_LAT_DIVISOR
                                        + links.degraded.extra_hop_lat_s)
           + links.ranks * c.PAT_LAT_PER_RANK_US * c.US)
    t = lat + size * busbw_factor(op, links.ranks) / bw
    return Candidate("pat", p, t, lat, bw, where)


def hierarchical(links: Links, op: str, size: float, p: str, arch: str) -> Candidate | None:
    """Inside the domain, then across domains on each rank's share (all_reduce, all_gather, reduce_scatter).

    all_reduce = intra reduce-scatter (S) + inter all_reduce of S/r on D ranks at net/r each + intra
    all-gather (S); all_gather / reduce_scatter = one intra and one inter phase. Each phase is a ring.
    """
    r, d = links.ranks_per_domain, links.domains
    if op not in ("all_reduce", "all_gather", "reduce_scatter") or r < 2 or d < 2:
        return None
    intra_bw = proto.ring_bw(links.intra_bw_bytes_s, p, op, False, False, arch)
    net_bw = proto.ring_bw(links.net_bw_bytes_s, p, op, True, False, arch)
    hop_i = proto.hop_lat_s(links.intra_hw, "ring", p)
    hop_n = proto.hop_lat_s("net", "ring", p, links.net_lat_scale) + links.degraded.extra_hop_lat_s
    intra_phases = 2 if op == "all_reduce" else 1
    inter_factor = 2.0 * (d - 1) / d if op == "all_reduce" else (d - 1) / d
    t_intra = intra_phases * ((r - 1) * hop_i + (r - 1) / r * size / intra_bw
                              + ring_step_wait_s(r - 1, size / r, intra_bw))
    inter_n = 2 * (d - 1) if op == "all_reduce" else d - 1
    t_inter = inter_n * hop_n + inter_factor * size / net_bw
    lat = proto.base_lat_s("ring", p) + intra_phases * (r - 1) * hop_i + inter_n * hop_n
    t = proto.base_lat_s("ring", p) + t_intra + t_inter
    where = "network" if t_inter > t_intra else "scale-up"
    return Candidate("hierarchical", p, t, lat, size / max(t - lat, 1e-30), where)


def p2p_waves(peers: int) -> int:
    """Batch waves NCCL needs to send to and receive from ``peers`` peers: ceil(peers / (P2P_CHANNELS /
    P2P_CHANNELS_PER_PEER x P2P_WORKS_PER_BATCH)), 128 peers a wave (constants.P2P_CHANNELS); each wave pays
    one message latency. 16,383 peers: 128 waves."""
    at_once = c.P2P_CHANNELS // c.P2P_CHANNELS_PER_PEER * c.P2P_WORKS_PER_BATCH
    return max(1, -(-peers // at_once))


def all_to_all(links: Links, size: float, p: str, arch: str) -> Candidate:
    """A send and a receive per peer: per rank S(r-1)/n bytes over scale-up and S(n-r)/n over its NIC share.

    time = base + waves x one hop + max(intra bytes / scale-up bw, inter bytes / (network / r)), each
    bandwidth under the protocol's ring factor; waves = :func:`p2p_waves` (n - 1), NCCL's per-peer cost.
    """
    n, r = links.ranks, links.ranks_per_domain
    f = proto.ring_bw(1.0, p, "all_to_all", links.domains > 1, r < 2, arch)
    t_in = size * (r - 1) / n / (f * links.intra_bw_bytes_s)
    t_net = size * (n - r) / n / (f * links.net_bw_bytes_s / r) if links.domains > 1 else 0.0
    hw, scale = ("net", links.net_lat_scale) if links.domains > 1 else (links.intra_hw, 1.0)
    hop = proto.hop_lat_s(hw, "ring", p, scale) + links.degraded.extra_hop_lat_s
    lat = proto.base_lat_s("ring", p) + p2p_waves(n - 1) * hop
    bw_term = max(t_in, t_net)
    where = "network" if t_net >= t_in else "scale-up"
    return Candidate(P2P, p, lat + bw_term, lat, size / max(bw_term, 1e-30), where)


def send_recv(links: Links, size: float, p: str, arch: str, nics_per_node: int) -> Candidate:
    """nccl-tests sendrecv: each rank sends S to the next; across domains through its GPU's NICs.

    bw = min(scale-up, network) under the protocol's ring factor, the network being the NICs affine to the
    source GPU, shared with the pairs using them (the placed group's ``nic_share``; a Group not placed:
    one NIC of its node, network / NICs per node); lat = base + one hop; time = lat + size / bw.
    """
    if links.domains > 1:
        placed = links.group is not None and links.group.nic_share is not None
        bw, where = links.net_bw_bytes_s / (1 if placed else max(1, nics_per_node)), "network"
        if links.ranks_per_domain > 1 and links.intra_bw_bytes_s < bw:
            bw, where = links.intra_bw_bytes_s, "scale-up"
        hop = proto.hop_lat_s("net", "ring", p, links.net_lat_scale) + links.degraded.extra_hop_lat_s
    else:
        bw, where, hop = links.intra_bw_bytes_s, "scale-up", proto.hop_lat_s(links.intra_hw, "ring", p)
    bw = proto.ring_bw(bw, p, "send_recv", links.domains > 1, links.ranks_per_domain < 2, arch)
    lat = proto.base_lat_s("ring", p) + hop
    return Candidate(P2P, p, lat + size / bw, lat, bw, where)
