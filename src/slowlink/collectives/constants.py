"""Every constant of the collective model, with its source. One set for every cluster: no per-case fits.

Latencies are NCCL's own (``src/graph/tuning.cc``, NCCL 2.18-2.21: ``baseLat`` and ``hwLat``), in
microseconds as there, converted to seconds where they are used. Bandwidth factors are NCCL's model
refinements from the same file. The two efficiencies NCCL does not state are derived from maintainer
statements (``calibration/collective_bandwidth.yaml``) and used for every NVLink generation alike.
"""

from __future__ import annotations

from slowlink import units
from slowlink.catalog.scale_up import SCALE_UP_EFFICIENCY as _SCALE_UP_EFFICIENCY

# The algorithms NCCL has and slowlink models (tuning.cc ncclAlgoStr, NCCL 2.23+): the default pick chooses
# among these only. CollNet (direct/chain) needs in-network reduction in the fabric's switches (InfiniBand
# SHARP), which cluster files cannot state yet, so it is not modelled.
ALGORITHMS = ("ring", "tree", "nvls", "nvls_tree", "pat")
# Algorithms NCCL does not have, run only when asked for by name (for comparison with other libraries):
# hierarchical = intra reduce-scatter, inter all_reduce on each rank's share, intra all-gather.
EXPLICIT_ALGORITHMS = ("hierarchical",)
PROTOCOLS = ("LL", "LL128", "Simple")
# Point-to-point (send/recv, and all_to_all built from them) has no protocol choice by the tuning model:
# NCCL's addP2pToPlan (src/enqueue.cc, NCCL 2.19-2.27) runs a transfer with LL when its bytes are at most
# nChannels x P2P_LL_THRESHOLD (default 16384) and with Simple otherwise; LL128 is never used for p2p.
# Below NCCL's smallest p2p part (half a 128 KiB network chunk, an eighth of a 512 KiB NVLink chunk: 64 KiB)
# a transfer runs on one channel, so the test is bytes per peer <= 16 KiB.
P2P_PROTOCOLS = ("LL", "Simple")
P2P_LL_THRESHOLD_BYTES = 16384
# How many peers an all_to_all serves at once. nccl-tests alltoall posts one ncclSend and one ncclRecv per peer
# (src/alltoall.cu); NCCL schedules them as n - 1 p2p rounds (init.cc ncclP2pSchedule) onto its p2p channels,
# each peer on p2pnChannelsPerPeer of them (graph/paths.cc ncclTopoComputeP2pChannels: p2pnChannels =
# min(nChannels, NCCL_MAX_P2P_NCHANNELS), powers of two), and a channel runs at most
# NCCL_MAX_DEV_WORK_P2P_PER_BATCH = 8 p2p works per batch, never two of one round (enqueue.cc
# addWorkBatchToPlan: "newBatch |= chan->wipBatch.nP2ps == NCCL_MAX_DEV_WORK_P2P_PER_BATCH"); a channel's batches
# run one after the other, each waiting on its peers' flags: one message latency per batch. NCCL's INFO line
# "32 p2p channels, 2 p2p channels per peer" (nccl issue 1706 prints the same fields; 2 per peer is the default
# NCCL_NCHANNELS_PER_NET_PEER, nccl issue 1272) gives 32 / 2 x 8 = 128 peers per batch wave.
P2P_CHANNELS = 32
P2P_CHANNELS_PER_PEER = 2
P2P_WORKS_PER_BATCH = 8

# NCCL baseLat[algorithm][protocol], microseconds: launch + protocol set-up cost of one collective.
BASE_LAT_US: dict[str, dict[str, float]] = {
    "tree": {"LL": 6.8, "LL128": 14.0, "Simple": 0.0},
    "ring": {"LL": 6.6, "LL128": 14.0, "Simple": 8.4},
    "nvls": {"LL": 0.0, "LL128": 0.0, "Simple": 0.0},
    "nvls_tree": {"LL": 0.0, "LL128": 0.0, "Simple": 0.0},
    "pat": {"LL": 8.0, "LL128": 8.0, "Simple": 8.0},
}

# NCCL hwLat[hw][algorithm][protocol], microseconds per hop (NVLink / PCI / network, Simple = with a chunk).
HW_LAT_US: dict[str, dict[str, dict[str, float]]] = {
    "nvlink": {"tree": {"LL": 0.6, "LL128": 1.25, "Simple": 4.0},
               "ring": {"LL": 0.6, "LL128": 1.9, "Simple": 3.4},
               "nvls": {"LL": 0.0, "LL128": 0.0, "Simple": 25.0},
               "nvls_tree": {"LL": 0.0, "LL128": 0.0, "Simple": 25.0},
               "pat": {"LL": 0.0, "LL128": 0.0, "Simple": 4.0}},
    "pci": {"tree": {"LL": 1.0, "LL128": 1.9, "Simple": 6.0},
            "ring": {"LL": 1.0, "LL128": 2.5, "Simple": 5.7},
            "nvls": {"LL": 0.0, "LL128": 0.0, "Simple": 0.0},
            "nvls_tree": {"LL": 0.0, "LL128": 0.0, "Simple": 0.0},
            "pat": {"LL": 0.0, "LL128": 0.0, "Simple": 4.0}},
    "net": {"tree": {"LL": 5.0, "LL128": 8.5, "Simple": 14.0},
            "ring": {"LL": 2.7, "LL128": 4.0, "Simple": 14.0},
            "nvls": {"LL": 0.0, "LL128": 0.0, "Simple": 18.0},
            "nvls_tree": {"LL": 0.0, "LL128": 0.0, "Simple": 20.9},
            "pat": {"LL": 0.0, "LL128": 0.0, "Simple": 14.0}},
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
# NCCL: a tree all_reduce's bandwidth is 0.92 of the link (tuning.cc ncclTopoTuneModel, "busBw*.92" for
# NCCL_ALGO_TREE and ncclFuncAllReduce, in every release 2.18.3-2.29 read) and algbw = busBw * 0.5 for tree and
# NVLS-tree. (0.9 had been recalled for 2.18-2.21; the source says .92.)
TREE_BW_FACTOR = 0.92
# NVLS-tree's network share: NCCL does not apply the tree's .92 to NVLS_TREE; it prices it as
# busBw = nChannels x min(bwIntra, bwInter, or bwInter / 2 beyond two nodes) with algbw = 5/6 busBw (tuning.cc
# 2.2x), in its own per-channel bwInter units from the search's speed tables, which the model does not have.
# 0.9 of the NICs (the tree refinement as it was recalled) stays until that is related to the NIC rate: open.
NVLS_TREE_NET_FACTOR = 0.9
TREE_ALGBW_RATIO = 0.5
# NCCL: a tree over exactly two nodes (domains) is a chain of two, each the root of one tree and the leaf of
# the other, so its network carries the data once each way: tuning.cc ncclTopoTuneModel takes bwIntra, not
# bwInter, for nNodes <= 2 (search.cc ncclTopoCompute raises a tree's bwIntra to at most 2 x bwInter) and
# doubles NVLS_TREE's interBw ("Handle 2 node case of NVLSTree"). Factor on the network's tree bandwidth.
TREE_TWO_DOMAIN_NET_FACTOR = 2.0
# ... but a tree channel never passes NCCL's per-channel tree ceiling (tuning.cc perChMaxTreeBws[compCap][N1/N2/N4],
# GB/s of bus bandwidth, NCCL 2.19-2.29: Volta {26.5, 18.5, 10.0}, Ampere {24.0, 23.6, 17.8}, Hopper {38.7, 41.4,
# 36.0}, Blackwell 2x Hopper; ncclTopoTuneModel: busBw = min(busBw x .92, nChannels x perChMaxTreeBw)). The two-node
# value bounds the doubling above. A two-node tree graph has one channel per NIC of the domain: search.cc's first
# pass finds one per NIC at the NIC's speed (not duplicated below 25 GB/s a channel, ncclTopoDupChannels), and its
# second pass raises only the tree's bwIntra (to at most 2 x bwInter). With 4 HDR NICs (24 GB/s each) a 2-node A100
# tree tops out at 4 x 23.6 / 2 = 47.2 GB/s algbw, below the ring's 96 x 16/30 = 51: NCCL runs the ring there, which
# the NIC binds (nccl-tests issue 175 / nccl issue 1048: 2 x 8 A100, 4 x 200G HDR, 86 GB/s busbw).
TREE_PER_CHANNEL_MAX_GBYTE_S: dict[str, tuple[float, float, float]] = {
    "volta": (26.5, 18.5, 10.0), "ampere": (24.0, 23.6, 17.8), "hopper": (38.7, 41.4, 36.0),
    "blackwell": (2 * 38.7, 2 * 41.4, 2 * 36.0)}
# NCCL llMaxBws, GB/s per GPU: the LL protocol cannot exceed this, by GPU generation (one node).
LL_MAX_GBYTE_S: dict[str, float] = {"volta": 39.0, "ampere": 87.7, "hopper": 141.0, "blackwell": 141.0}
LL_MAX_DEFAULT_GBYTE_S = 87.7

# NCCL-achievable fraction of a scale-up link: one fact, kept with the scale-up catalog (its source there).
SCALE_UP_EFFICIENCY = _SCALE_UP_EFFICIENCY

# NVLS (NVLink SHARP) all_reduce. The switch reduces, so each GPU sends and receives its buffer about once:
# algbw, not busbw, is what the link limits. NCCL (src/enqueue.cc, NVLS branch of the chunk computation)
# runs nvlsChannels channels x nHeads heads concurrently, each moving one chunk per loop; the chunk starts
# at nvlsChunkSize (128 KiB) and is halved to 64 KiB below 64 x ops x chunk bytes, to 32 KiB below 8 x and
# to 16 KiB below 2 x (ops = channels x heads). Two costs follow from that loop, one constant each:
#  - a fixed cost per chunk (flag/semaphore round through the switch), worth NVLS_CHUNK_OVERHEAD_BYTES of
#    transfer: bandwidth(chunk) = peak x chunk / (chunk + overhead);
#  - a pipeline of NVLS_PIPELINE_FILL_LOOPS + 1 stages (multimem reduce-load, then multicast store): the
#    first result leaves after the fill, which costs NVLS_PIPELINE_FILL_LOOPS loops of ops x chunk bytes.
# Both constants come from one published step, Azure ND H100 v5 (NCCL 2.18.5, calibration file): between
# 512 MiB and 1 GiB NCCL doubles the chunk (64 -> 128 KiB) at 64 loops each and busbw jumps 438 -> 466 GB/s
# (bandwidth(64K)/bandwidth(128K) = 0.94 gives the 8.7 KiB overhead); 8 GiB vs 1 GiB at the same chunk
# (512 vs 64 loops) gives the 2-loop fill. They are checked, not fitted, on the rest of that curve and on the
# H200 curve (tests/collectives/test_golden.py); the GB200 NVL72 curves once counted as a check were run with
# NVLS off (docs/collectives.md, NVLS-tree).
NVLS_CHUNK_BYTES = 128 * units.KiB                 # NCCL nvlsChunkSize default (NCCL_NVLS_CHUNKSIZE)
NVLS_CHUNK_OVERHEAD_BYTES = 8.74 * units.KiB
NVLS_PIPELINE_FILL_LOOPS = 2
# NVLS channels by generation (NCCL src/transport/nvls.cc: NVLS_NCHANNELS_SM90 16, _SM100 32, and 24 on
# SM100 multi-node NVLink (NVL72) domains). Heads: one per rank of the domain.
NVLS_CHANNELS: dict[str, int] = {"hopper": 16, "blackwell": 32}
NVLS_CHANNELS_MULTI_NODE_DOMAIN = 24
# Peak NVLS algbw as a fraction of the per-GPU line rate, Hopper: 274.8 GB/s algbw at 128 KiB chunks
# (8 GiB and 1 GiB on ND H100 v5, fill removed) of 450, scaled to an infinite chunk: 293.6 / 450.
NVLS_PEAK_LINE_FRACTION_HOPPER = 293.6 / 450.0
# Other generations follow NCCL's own NVLS efficiency table (tuning.cc nvlsEfficiency: Hopper 0.85,
# Blackwell 0.74): Blackwell's NVLink5 switch delivers 0.74 / 0.85 of Hopper's share of its line rate.
NVLS_EFFICIENCY: dict[str, float] = {"hopper": 0.85, "blackwell": 0.74}
# NVLS-tree's per-channel cap (NCCL 2.28.3+, src/graph/tuning.cc perChMaxNVLSTreeBws[compCap][N2 / N4+], GB/s;
# not in 2.19-2.27): ncclTopoTuneModel takes a channel's bandwidth as min(NVLS intra, inter (x2 on two nodes),
# this cap) and busBw = nChannels x that, so NCCL's NVLS-tree busbw is at most nChannels x cap. One node has
# no NVLS-tree (N1 0.0). Blackwell N4 is 43.1 in 2.28.3, 43.8 from 2.28.9 (used here). Only sm90+ run NVLS.
NVLS_TREE_PER_CHANNEL_MAX_GBYTE_S: dict[str, tuple[float, float]] = {"hopper": (57.7, 45.5),
                                                                     "blackwell": (96.0, 43.8)}
# NVLS graph channels (search.cc ncclTopoCompute / ncclTopoSearchRecNet, NCCL 2.19-2.29): one head per NIC that
# has a GPU of its own, distinct GPUs, at most min(NCCL_MAX_NVLS_ARITY (device.h: 32), GPUs).
NVLS_MAX_ARITY = 32

# PAT (NCCL 2.23+, all_gather / reduce_scatter with one rank per node): tuning.cc charges busBw x 0.75 and
# latency baseLat + log2(nodes) x net latency / 3.5 + 2.8 us per rank.
PAT_BW_FACTOR = 0.75
PAT_LAT_PER_RANK_US = 2.8
PAT_LOG_LAT_DIVISOR = 3.5

# Chunking (NCCL 2.18.5, src/include/collectives.h, devcomm.h, init.cc). broadcast / reduce run a chain
# (root -> ... -> last) with one FIFO step per chunk (BROADCAST_CHUNKSTEPS = REDUCE_CHUNKSTEPS = 1): Simple
# 4 MiB / 8 = 512 KiB. Unlike a ring, a chain's links wait for the first chunk to reach them: that fill is
# real, (hops - 1) chunk times. LL / LL128 forward line by line and fill within the hop latencies.
CHAIN_CHUNK_BYTES = 512 * units.KiB
# Tree (Simple): chunk = one FIFO step (512 KiB), halved while the message gives a channel fewer than 8 x depth
# chunks (down to 128 KiB), 4 x depth (down to 64 KiB), depth (down to 32 KiB) (enqueue.cc calcCollChunking).
TREE_CHUNK_BYTES = 512 * units.KiB
TREE_CHUNK_HALVING: tuple[tuple[int, float], ...] = ((8, 128 * units.KiB), (4, 64 * units.KiB), (1, 32 * units.KiB))
# Channels a ring or tree runs side by side: 24 on an HGX A100 node ("Channel 23/24" in the NCCL log of
# NVIDIA/nccl-tests issue 100). Used only to size chain and tree chunks; not modelled per topology.
CHANNELS = 24
# Ring step wait (replaces the old byte-window "pipeline fill"). In a ring every rank sends its own data
# from the first step and every link carries every step, so a ring has no pipeline fill: its bytes term is
# bytes per link / bw. What published NVLink curves still show at mid sizes is a cost per step that grows
# with a short step's transfer time and saturates: each step after the first is charged
# min(step bytes / bw, RING_STEP_WAIT_US). The cap is a time (GPU-side flag wait, barriers and system fence
# per slice, prims_simple.h genericOp), so a slow link never scales it: on a 24 MB/s TCP ring it is
# microseconds against a bytes term of tenths of a second. Empirical, ONE calibration point: the Azure
# ND A100 v4 ring at 64 MiB (NCCL 2.18.5, 166.6 GB/s busbw): 12 us. The rest of the A100 curve is a check.
# Not derived from NCCL's code: a first-principles per-slice model (fixed cost per slice, 2 slices per
# chunk, loops of 24 channels x 8 ranks x 2 MiB) could not fit both the 1 MiB point (NCCL's latency alone)
# and 16-64 MiB (see docs/collectives.md).
RING_STEP_WAIT_US = 12.0

US = units.US
