"""NCCL's tree, NVLS and NVLS-tree all_reduce as flows: which bytes cross which links, per channel.

Sources (NVIDIA/nccl master): ``src/graph/trees.cc`` (``ncclGetBtree`` / ``ncclGetDtree``: the two binary
trees over nodes), ``src/graph/connect.cc`` (``connectTrees``, ``connectNvls``: channel ``c`` uses tree
``c % 2``; NVLS-tree has one *head* GPU per NIC, each head runs the inter-node trees for its share of the
data over its own NIC, rail to rail), ``src/device/all_reduce.h`` (``RunWorkColl<..., NCCL_ALGO_NVLS_TREE>``:
scatter to the switch, reduce at the head, send up / receive down the tree, broadcast through the switch;
all stages pipelined over chunks), ``src/graph/tuning.cc`` (bandwidth model).

What each builder puts on the links, for a buffer of ``S`` bytes and ``k`` channels (one per NIC affine to
the group's GPUs in a domain, headed by the GPU nearest that NIC; NVLS-tree only its first
``nvls_tree_heads``: NCCL's NVLS graph has at most 32 heads, one NIC each):

* network (tree and NVLS-tree): per channel and per tree, every tree edge carries ``S / 2k`` up (reduce)
  and ``S / 2k`` down (broadcast) at once. An inner node of one tree (two children) is a leaf of the other,
  so each NIC sends and receives ``3 S/2k + S/2k = 2 S/k``: the node's NICs move ``2 S`` each way, NCCL's
  ``algbw = busBw / 2`` (tuning.cc's ``nRanks / nsteps`` ratio). Over two domains the two trees are the
  two directions of one edge: each NIC moves ``S / k`` each way (``algorithms.tree_net_factor``).
* tree inside a domain: per channel a chain from the head through the domain's GPUs (rotated so every GPU
  heads one channel); each chain edge carries ``S / k`` each way (both trees' halves).
* NVLS inside a domain (one domain, or the NVLS part of NVLS-tree): every GPU pushes its buffer to the
  switch and pulls the result back: ``S`` up and ``S`` down its scale-up link.

Efficiencies and fills are the analytical model's (:mod:`slowlink.collectives.algorithms`): NVLS traffic on
a scale-up link moves at its rate for this size (``nvls_transfer``: peak by GPU generation x chunk / (chunk
+ per-chunk cost); across domains at most NCCL's NVLS-tree per-channel cap, ``nvls_tree_cap_bytes_s``) where
ring traffic gets ``SCALE_UP_EFFICIENCY`` (the link's capacity in the graph), so
NVLS flows carry ``S x SCALE_UP / NVLS`` wire-equivalent bytes, and the phase pays the same pipeline fills
(``nvls_fill_fraction``, ``tree_fill_fraction``) on top of its drain; tree flows on the network carry
``1 / TREE_BW_FACTOR`` wire bytes per byte (NCCL's tree refinement, ``busBw x .92`` in tuning.cc
2.18.3-2.29; NVLS-tree has none: its network is charged ``1 / NVLS_TREE_NET_FACTOR``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, lru_cache, partial

import numpy as np

from slowlink import units
from slowlink.collectives.algorithms import (
    nvls_channels,
    nvls_fill_fraction,
    nvls_transfer,
    nvls_tree_cap_bytes_s,
    nvls_tree_heads,
    tree_fill_fraction,
)
from slowlink.collectives.communicator import domain_channels
from slowlink.collectives.constants import (
    NVLS_TREE_NET_FACTOR,
    SCALE_UP_EFFICIENCY,
    TREE_BW_FACTOR,
    TREE_PER_CHANNEL_MAX_GBYTE_S,
)
from slowlink.collectives.nccl_trees import btree_parent, dtree_edge_array, dtree_edges
from slowlink.sim.arrays import FlowArrays, domain_channels_array, path_latencies
from slowlink.sim.phase import Phase, domains, path_latency
from slowlink.topology.fabric import Topology, tag_id

Channel = tuple[int, int]  # (head rank, local NIC index on the head's node)


@lru_cache(maxsize=64)
def tree_depth(n: int) -> int:
    """Edges from the deepest node to the root of NCCL's binary tree over ``n`` nodes (mirror/shift keep it)."""
    depth = 0
    for r in range(n):
        d, x = 0, r
        while x > 0:
            x, d = btree_parent(n, x), d + 1
        depth = max(depth, d)
    return depth


def channels(topo: Topology, dom: list[int]) -> list[Channel]:
    """The domain's network channels (:func:`slowlink.collectives.communicator.domain_channels`, the rule
    both models share): one per NIC affine to the group's GPUs in it, headed by the first GPU nearest it."""
    return [(r, ln) for r, _, ln in domain_channels(dom, [topo.node_of(r) for r in dom], topo.gpus_per_node,
                                                   topo.nics_per_node)]


def head_channels(chans: list[Channel], heads: int) -> list[Channel]:
    """NVLS-tree's network channels in a domain: the first NIC of each of its first ``heads`` head GPUs.

    NCCL's NVLS search (search.cc ncclTopoSearchRecNet) walks the NICs GPU by GPU (ncclTopoSelectNets) and
    takes a NIC only if its local GPU is not a head yet; a head then sends all its channels on that NIC
    (getNvlsNetDev), and only heads join the inter-node trees (connect.cc connectNvls)."""
    out: list[Channel] = []
    seen: set[int] = set()
    for head, nic in chans:
        if head not in seen and len(out) < heads:
            seen.add(head)
            out.append((head, nic))
    return out


def _network_trees(topo: Topology, ph: Phase, group: int, chans: list[list[Channel]], share_bytes: float,
                   key: int) -> float:
    """Both trees over the domains, channel ``h`` of every domain on its own NIC (rail to rail); each edge
    carries ``share_bytes`` up and down per channel and tree. Returns the slowest network hop latency."""
    k = max(len(c) for c in chans)
    worst = 0.0
    for t, edges in enumerate(dtree_edges(len(chans))):
        for c, p in edges:
            for h in range(k):
                (sc, lc), (sp, lp) = chans[c][h % len(chans[c])], chans[p][h % len(chans[p])]
                for src, ls, dst, ld in ((sc, lc, sp, lp), (sp, lp, sc, lc)):
                    paths = topo.gpu_paths(src, dst, ls, key + 2 * h + t, ld)
                    ph.add(paths, share_bytes, ph.name, group)
                    worst = max(worst, path_latency(topo, paths))
    return worst


def _chains(topo: Topology, ph: Phase, group: int, dom: list[int], chans: list[Channel], edge_bytes: float) -> None:
    """Per channel a chain from its head through the domain (rotated: each GPU heads its NIC's channel);
    every chain edge carries ``edge_bytes`` each way. Only the scale-up links see it, so the bytes are
    summed per GPU link (exact for the lockstep model: a GPU pair's flow loads its two links only)."""
    r = len(dom)
    sent = dict.fromkeys(dom, 0.0)
    for head, _ in chans:
        start = dom.index(head)
        for i in range(r):
            sent[dom[(start + i) % r]] += edge_bytes * ((i > 0) + (i < r - 1))
    for g, b in sent.items():
        gpu = topo.gpu_of(g)
        if b > 0:
            ph.add([(1.0, (topo.gpu_up[gpu],)), (1.0, (topo.gpu_down[gpu],))], b, ph.name, group)


def _two_domain_slowdown(topo: Topology, n_domains: int, nic_bytes_s: Callable[[], float]) -> float:
    """How much longer NCCL's per-channel tree ceiling makes a two-domain tree's network part than its NICs
    would (a kernel limit, no link's: expressed as more bytes, as the NVLS phase does): each channel moves 2 x
    its NIC's rate (``nic_bytes_s()``: the slowest of the group's channels, read only here) of bus bandwidth at
    most, capped at TREE_PER_CHANNEL_MAX_GBYTE_S (the analytical model's
    :func:`slowlink.collectives.algorithms.two_domain_tree_cap_bytes_s`, same ceiling and channels)."""
    if n_domains != 2 or topo.arch not in TREE_PER_CHANNEL_MAX_GBYTE_S:
        return 1.0
    return max(1.0, 2.0 * TREE_BW_FACTOR * nic_bytes_s() / (TREE_PER_CHANNEL_MAX_GBYTE_S[topo.arch][1] * units.GB))


def _slowest_nic(topo: Topology, chans: list[list[Channel]]) -> float:
    """The lowest capacity (bytes/s) of the NICs the channels leave by."""
    return min(topo.capacity_bytes_s[topo.nic_up[topo.nic_index(r, ln)]] for c in chans for r, ln in c)


def tree_phase(topo: Topology, groups: list[list[int]], size_bytes: float, tag: str = "tree",
               arrays: bool = False) -> Phase:
    """NCCL's double binary tree all_reduce (Simple): chains inside domains, trees across, per channel;
    ``arrays``: as :class:`~slowlink.sim.arrays.FlowArrays` where :func:`_tree_arrays` applies (the same flows)."""
    built = _tree_arrays(topo, groups, size_bytes, tag) if arrays else None
    if built is not None:
        return Phase(name=tag, arrays=built[0], step_latency_s=built[1], fill_fraction=built[2])
    ph = Phase(name=tag)
    key = tag_id(tag)
    wire = size_bytes / TREE_BW_FACTOR
    for gi, g in enumerate(groups):
        doms = domains(topo, g)
        chans = [channels(topo, dm) for dm in doms]
        k = max(len(c) for c in chans)
        share = wire / (2 * k) * _two_domain_slowdown(topo, len(doms), partial(_slowest_nic, topo, chans))
        net = _network_trees(topo, ph, gi, chans, share, key) if len(doms) > 1 else 0.0
        for dm, ch in zip(doms, chans, strict=True):
            _chains(topo, ph, gi, dm, ch, wire / k)
        chain = max(len(dm) for dm in doms) - 1
        hop = topo.latency_s[topo.gpu_up[topo.gpu_of(g[0])]] + topo.latency_s[topo.gpu_down[topo.gpu_of(g[0])]]
        lat = 2 * (chain * hop + tree_depth(len(doms)) * net)
        ph.step_latency_s = max(ph.step_latency_s, lat)
        ph.fill_fraction = max(ph.fill_fraction,
                               tree_fill_fraction(chain + tree_depth(len(doms)), size_bytes, "Simple"))
    return ph


def _tree_arrays(topo: Topology, groups: list[list[int]], size_bytes: float,
                 tag: str) -> tuple[FlowArrays, float, float] | None:
    """:func:`tree_phase`'s flows as arrays, in its order (per group: both trees' edges, each channel, up then
    down; then every domain's GPUs, up and down their scale-up link), its per-step latency and fill; None outside
    the regular case (:func:`~slowlink.sim.arrays.domain_channels_array`, a fat tree's one path per flow)."""
    regular = domain_channels_array(topo, groups) if topo.route_array is not None else None
    if regular is None:
        return None
    doms, head, nic = regular
    g, d, m = doms.shape
    k = head.shape[2]
    wire = size_bytes / TREE_BW_FACTOR
    heads = np.take_along_axis(doms, head, axis=2)  # (g, d, k): each channel's head rank
    up, down = np.asarray(topo.gpu_up, dtype=np.int64), np.asarray(topo.gpu_down, dtype=np.int64)

    @cache
    def slowest() -> list[float]:  # every group's slowest channel NIC (read only where a two-domain tree is capped)
        cap = np.asarray(topo.capacity_bytes_s, dtype=np.float64)[np.asarray(topo.nic_up, dtype=np.int64)]
        out: list[float] = cap[topo.nic_index_array(heads, nic)].reshape(g, -1).min(axis=1).tolist()
        return out

    def slowest_of(i: int) -> float:
        return slowest()[i]

    share = [wire / (2 * k) * _two_domain_slowdown(topo, d, partial(slowest_of, i)) for i in range(g)]
    parts_links, parts_sizes = [], []
    net = np.zeros(g)
    if d > 1:
        edges = dtree_edge_array(d)  # (child, parent), tree 0 first: dtree_edges' order
        tree = (np.arange(len(edges)) >= d - 1).astype(np.int64)
        c, p = edges[:, 0], edges[:, 1]
        # (g, edges, k, 2): child -> parent, then parent -> child
        src = np.stack((heads[:, c, :], heads[:, p, :]), axis=3)
        dst = np.stack((heads[:, p, :], heads[:, c, :]), axis=3)
        ls = np.stack((nic[:, c, :], nic[:, p, :]), axis=3)
        ld = np.stack((nic[:, p, :], nic[:, c, :]), axis=3)
        key = np.broadcast_to((tag_id(tag) + 2 * np.arange(k)[None, :] + tree[:, None])[None, :, :, None], src.shape)
        paths = topo.gpu_path_array(src.ravel(), dst.ravel(), ls.ravel(), key.ravel(), ld.ravel())
        if paths is None:
            return None
        net = path_latencies(topo, paths).reshape(g, -1).max(axis=1)
        parts_links.append(paths.reshape(g, -1, paths.shape[1]))
        parts_sizes.append(np.repeat(np.asarray(share)[:, None], src[0].size, axis=1))
    if m > 1:  # each domain's chains (_chains): bytes per GPU summed channel by channel, in head order
        sent = np.zeros((g, d, m))
        edge = wire / k
        pos = np.arange(m)
        for h in range(k):
            i = (pos - head[:, :, h:h + 1]) % m
            sent = sent + edge * ((i > 0).astype(np.int64) + (i < m - 1))
        gpu = topo.gpu_array(doms)
        parts_links.append(np.stack((up[gpu], down[gpu]), axis=3).reshape(g, -1, 1))
        parts_sizes.append(np.repeat(sent.reshape(g, -1), 2, axis=1))
    if not parts_links:
        return None
    width = max(x.shape[2] for x in parts_links)
    links = np.concatenate([np.pad(x, ((0, 0), (0, 0), (0, width - x.shape[2])), constant_values=-1)
                            for x in parts_links], axis=1)
    sizes = np.concatenate(parts_sizes, axis=1)
    first = np.asarray([grp[0] for grp in groups], dtype=np.int64)
    lat = np.asarray(topo.latency_s, dtype=np.float64)
    gpu0 = topo.gpu_array(first)
    hop = lat[up[gpu0]] + lat[down[gpu0]]
    step = 2 * ((m - 1) * hop + tree_depth(d) * net)
    group = np.repeat(np.arange(g), links.shape[1])
    return (FlowArrays(links.reshape(-1, width), sizes.ravel(), group), float(max(0.0, step.max())),
            max(0.0, tree_fill_fraction(m - 1 + tree_depth(d), size_bytes, "Simple")))


def nvls_phase(topo: Topology, groups: list[list[int]], size_bytes: float, tag: str = "nvls") -> Phase:
    """NVLS inside each domain (every GPU ``S`` up and down its scale-up link) and, across domains,
    NVLS-tree: both trees over the NVLS heads, each on its own NIC and its share ``S / k``: the domain's
    first ``nvls_tree_heads`` channels (at most 32 of a GB200 NVL72 rack's 72 NICs)."""
    ph = Phase(name=tag)
    key = tag_id(tag)
    chans_nvls = nvls_channels(topo.arch, topo.domain_gpus > topo.gpus_per_node)
    for gi, g in enumerate(groups):
        doms = domains(topo, g)
        rpd = max(len(dm) for dm in doms)
        nics = [channels(topo, dm) for dm in doms] if len(doms) > 1 else []
        heads = nvls_tree_heads(rpd, max((len(c) for c in nics), default=0))
        chans = [head_channels(c, heads) for c in nics]
        k = max((len(c) for c in chans), default=0)
        # NVLS moves at the analytical model's rate for this size (peak x chunk / (chunk + per-chunk cost)), at
        # most NCCL's NVLS-tree per-channel cap over its heads (a kernel limit, no link's: the same function)
        nvls_frac = nvls_transfer(size_bytes, rpd, chans_nvls, 1.0, topo.arch)[2]
        line = topo.capacity_bytes_s[topo.gpu_up[topo.gpu_of(g[0])]] / SCALE_UP_EFFICIENCY
        cap = nvls_tree_cap_bytes_s(topo.arch, len(g), len(doms), heads)
        nvls_bytes = size_bytes * SCALE_UP_EFFICIENCY / min(nvls_frac, cap / line)
        ph.fill_fraction = max(ph.fill_fraction, nvls_fill_fraction(size_bytes, rpd, len(doms), chans_nvls))
        for r in g:
            gpu = topo.gpu_of(r)
            ph.add([(1.0, (topo.gpu_up[gpu],)), (1.0, (topo.gpu_down[gpu],))], nvls_bytes, tag, gi)
        hop = topo.latency_s[topo.gpu_up[topo.gpu_of(g[0])]] + topo.latency_s[topo.gpu_down[topo.gpu_of(g[0])]]
        lat = 2 * hop
        if len(doms) > 1:
            net = _network_trees(topo, ph, gi, chans, size_bytes / NVLS_TREE_NET_FACTOR / (2 * k), key)
            lat += 2 * tree_depth(len(doms)) * net
        ph.step_latency_s = max(ph.step_latency_s, lat)
    return ph
