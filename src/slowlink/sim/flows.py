"""Collectives expanded into flows on a :class:`~slowlink.topology.fabric.Topology`, one *phase* at a time.

A :class:`~slowlink.sim.phase.Phase` is a set of flows that run at once, repeated ``steps`` times (the
symmetry shortcut: every step of a ring moves the same bytes over the same links), plus the latency a chunk
accumulates per step. Phases run one after the other. Every builder takes *all* concurrent groups (lists of
ranks) so that groups sharing links contend; each flow records its group (``Phase.group_of``).

* ring (all_reduce ``2(n-1)`` steps, all_gather / reduce_scatter ``n-1``, of ``size/n``): ranks ordered
  by scale-up domain then node (NCCL builds rings along the topology); a hop leaving a scale-up domain is
  split over the domain's channels, one per NIC affine to the group's GPUs anywhere in the domain (NCCL's
  channels over the rails; every tray of a multi-node NVLink domain: :func:`exit_paths`). Per-step latency: the
  mean hop latency round the ring (a pipelined ring pays each hop's latency once per step on the chain, as
  NCCL's ``(nsteps - ninter) intra + ninter net``), not the slowest hop.
* tree (all_reduce, NCCL's double binary tree across domains, a chain inside, one channel per NIC) and
  nvls (NVLS in one domain, NVLS-tree across): :mod:`slowlink.sim.trees`.
* hierarchical: intra-domain reduce-scatter ring, then ``r`` concurrent inter-domain rings on ``S/r``,
  then an intra-domain all-gather ring (three phases).
* all_to_all: one flow per ordered pair, ``size/n`` each, one step (its latency once per wave of peers);
  a cross-node pair leaves by the NICs of
  the destination's rail when the source node holds a member on it (PXN), else by the source GPU's own,
  its channels spread over them (:func:`slowlink.topology.nic.peer_nics`, the rule the analytical
  model prices).
* send_recv: each group is ``[src, dst]``; ``size`` from the source GPU's affine NICs, spread over them.
"""

from __future__ import annotations

from slowlink.collectives.algorithms import p2p_waves
from slowlink.sim.arrays import ring_arrays, send_recv_arrays
from slowlink.sim.engine import Flow
from slowlink.sim.phase import Phase, domains, path_latency
from slowlink.sim.trees import Channel, channels, nvls_phase, tree_phase
from slowlink.topology.fabric import Paths, Topology, tag_id

__all__ = ["RING_STEPS", "Phase", "exit_paths", "nvls_phase", "phases", "ring_phase", "ring_step_flows", "tree_phase"]


def exit_paths(topo: Topology, a: list[Channel], b: list[Channel], key: int) -> Paths:
    """One ring hop from a scale-up domain (channels ``a``) to the next (channels ``b``): split evenly over
    the sending domain's channels, channel ``c`` from its head's NIC to the ``c``-th of ``b`` (mod its count).
    A domain spanning nodes (multi-node NVLink) leaves by every member tray's NICs, as NCCL's fused clique
    topology does (:func:`slowlink.collectives.communicator.domain_channels`)."""
    out: Paths = []
    for c, (src, ln) in enumerate(a):
        dst, ld = b[c % len(b)]
        for w, p in topo.gpu_paths(src, dst, ln, key + c, ld):
            out.append((w / len(a), p))
    return out


def ring_phase(topo: Topology, groups: list[list[int]], chunk_bytes: float, steps: int,
               tag: str = "ring", arrays: bool = False) -> Phase:
    """One ring step of every group (``chunk_bytes`` per rank), to be repeated ``steps`` times; ``arrays``: as
    :class:`~slowlink.sim.arrays.FlowArrays` where :func:`~slowlink.sim.arrays.ring_arrays` applies."""
    built = ring_arrays(topo, groups, chunk_bytes, tag) if arrays else None
    if built is not None:
        return Phase(steps=steps, name=tag, step_latency_s=built[1], arrays=built[0])
    ph = Phase(steps=steps, name=tag)
    key = tag_id(tag)
    for gi, g in enumerate(groups):
        doms = domains(topo, g)
        chans = [channels(topo, dm) for dm in doms]
        lat, hops = 0.0, 0
        for d, dm in enumerate(doms):
            for i in range(len(dm) - 1):
                paths = topo.gpu_paths(dm[i], dm[i + 1])
                ph.add(paths, chunk_bytes, tag, gi)
                lat += path_latency(topo, paths)
            nxt = (d + 1) % len(doms)
            paths = exit_paths(topo, chans[d], chans[nxt], key) if nxt != d else topo.gpu_paths(dm[-1], dm[0])
            ph.add(paths, chunk_bytes, tag, gi)
            lat += path_latency(topo, paths)
            hops += len(dm)
        ph.step_latency_s = max(ph.step_latency_s, lat / max(1, hops))
    return ph


def ring_step_flows(topo: Topology, ranks: list[int], chunk_bytes: float, tag: str = "ring") -> list[Flow]:
    """One ring step of one group: every rank sends ``chunk_bytes`` to the next."""
    return ring_phase(topo, [ranks], chunk_bytes, 1, tag).flows


def all_to_all_phase(topo: Topology, groups: list[list[int]], size_bytes: float, tag: str = "a2a") -> Phase:
    """Every rank of each group sends ``size_bytes / n`` to every other rank of its group; its latency is the
    slowest path's, once per wave of peers NCCL serves at once (:func:`slowlink.collectives.algorithms.p2p_waves`,
    the analytical model's per-peer cost)."""
    ph = Phase(name=tag, pipelined=False)
    key = tag_id(tag)
    gpn = topo.gpus_per_node
    for gi, g in enumerate(groups):
        n = len(g)
        on: dict[int, set[int]] = {}
        for r in g:
            on.setdefault(topo.node_of(r), set()).add(r % gpn)
        for src in g:
            for dst in g:
                if src != dst:
                    nics = topo.peer_nics(src, dst, on[topo.node_of(src)])
                    paths = _spread(topo, src, dst, nics, key)
                    ph.add(paths, size_bytes / n, tag, gi)
                    ph.step_latency_s = max(ph.step_latency_s, p2p_waves(n - 1) * path_latency(topo, paths))
    return ph


def _spread(topo: Topology, src: int, dst: int, nics: list[int], key: int) -> Paths:
    """``src -> dst`` with its channels split evenly over the source node's ``nics``, each arriving on the
    same rail (inside a scale-up domain the NICs are not used)."""
    if topo.domain_of(src) == topo.domain_of(dst):
        return topo.gpu_paths(src, dst)
    return [(w / len(nics), p) for c, ln in enumerate(nics) for w, p in topo.gpu_paths(src, dst, ln, key + c, ln)]


def send_recv_phase(topo: Topology, pairs: list[list[int]], size_bytes: float, tag: str = "p2p",
                    arrays: bool = False) -> Phase:
    """Each pair ``[src, dst]`` moves ``size_bytes`` at once (``arrays``: as in :func:`ring_phase`)."""
    built = send_recv_arrays(topo, pairs, size_bytes, tag) if arrays else None
    if built is not None:
        return Phase(name=tag, pipelined=False, step_latency_s=built[1], arrays=built[0])
    ph = Phase(name=tag, pipelined=False)
    key = tag_id(tag)
    for gi, pair in enumerate(pairs):
        src, dst = pair[0], pair[-1]
        paths = _spread(topo, src, dst, topo.affine_nics(src), key)
        ph.add(paths, size_bytes, tag, gi)
        ph.step_latency_s = max(ph.step_latency_s, path_latency(topo, paths))
    return ph


def hierarchical_phases(topo: Topology, groups: list[list[int]], op: str, size_bytes: float,
                        arrays: bool = False) -> list[Phase]:
    """Intra reduce-scatter, inter ring on ``S/r`` (one ring per local position), intra all-gather."""
    intra = [dm for g in groups for dm in domains(topo, g)]
    r = max(len(dm) for dm in intra)
    inter: list[list[int]] = []
    for g in groups:
        doms = domains(topo, g)
        inter += [[dm[i] for dm in doms if i < len(dm)] for i in range(r)]
    d = max(len(x) for x in inter)
    out: list[Phase] = []
    if op in ("all_reduce", "reduce_scatter"):
        out.append(ring_phase(topo, intra, size_bytes / r, r - 1, "hier-intra-rs", arrays))
    inter_steps = 2 * (d - 1) if op == "all_reduce" else d - 1
    out.append(ring_phase(topo, inter, size_bytes / r / d, inter_steps, "hier-inter", arrays))
    if op in ("all_reduce", "all_gather"):
        out.append(ring_phase(topo, intra, size_bytes / r, r - 1, "hier-intra-ag", arrays))
    return out


RING_STEPS = {"all_reduce": lambda n: 2 * (n - 1), "all_gather": lambda n: n - 1,
              "reduce_scatter": lambda n: n - 1}


def phases(topo: Topology, op: str, algorithm: str, groups: list[list[int]], size_bytes: float,
           arrays: bool = False) -> list[Phase]:
    """The phases of ``op`` with ``algorithm`` (the analytical model's pick) over concurrent ``groups``;
    ``arrays``: ring, tree and send_recv phases as arrays where they can be (:mod:`slowlink.sim.arrays`; the same flows,
    for a caller that only times them)."""
    n = max(len(g) for g in groups)
    if op == "all_to_all":
        return [all_to_all_phase(topo, groups, size_bytes)]
    if op == "send_recv":
        return [send_recv_phase(topo, groups, size_bytes, arrays=arrays)]
    if op not in RING_STEPS:
        raise ValueError(f"op ({op!r}) is not simulated: use all_reduce, all_gather, reduce_scatter, "
                         "all_to_all or send_recv")
    if algorithm == "tree" and op == "all_reduce":
        return [tree_phase(topo, groups, size_bytes, arrays=arrays)]
    if algorithm in ("nvls", "nvls_tree") and op == "all_reduce":
        return [nvls_phase(topo, groups, size_bytes)]
    if algorithm == "hierarchical" and min(len(domains(topo, g)) for g in groups) > 1:
        return hierarchical_phases(topo, groups, op, size_bytes, arrays)
    return [ring_phase(topo, groups, size_bytes / n, RING_STEPS[op](n), arrays=arrays)]
