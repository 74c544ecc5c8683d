"""Which NICs a GPU's network traffic uses: the one NIC-affinity rule that the analytical collective model
(:mod:`slowlink.collectives.communicator`), the flow builders (:class:`slowlink.topology.fabric.Topology`)
and the degraded-part penalties (:mod:`slowlink.topology.degraded`) all read. NICs are numbered locally
within a node, GPUs by their local index."""

from __future__ import annotations

from collections.abc import Iterable


def affine_nics(nics_per_node: int, gpus_per_node: int, local_gpu: int) -> list[int]:
    """Local indices of the NICs nearest GPU ``local_gpu`` (PCIe affinity: NICs split evenly over GPUs).

    This is the one rule for which NICs a GPU's network traffic uses, in both models: NCCL sends a GPU's
    channels only through its local NICs. Rings and trees: ``ncclTopoCompute`` (src/graph/search.cc) starts
    at the closest path type (PIX) and relaxes ``typeInter`` past PXN (to PHB/SYS, a NIC behind another
    PCIe switch or the CPU) only while it has no solution at all. Point-to-point (send/recv, all_to_all):
    ``ncclTopoGetLocalNet`` (src/graph/topo.cc) picks among the NICs at the best path to the GPU, the
    GPUs sharing them splitting them evenly, channel ``c`` on the ``c``-th, and ``ncclTopoGetNchannels``
    (src/graph/paths.cc) opens at least one channel per such NIC. A GPU with fewer NICs than the node has
    therefore never reaches the others by itself, whatever the communicator (:func:`peer_nics` for PXN).
    """
    if nics_per_node >= gpus_per_node:
        per = nics_per_node // gpus_per_node
        return list(range(local_gpu * per, local_gpu * per + per))
    return [local_gpu * nics_per_node // gpus_per_node]


def group_nics(nics_per_node: int, gpus_per_node: int, local_gpus: Iterable[int]) -> set[int]:
    """The NICs one node's members of a communicator (their local GPU indices) send and receive through:
    the union of their :func:`affine_nics`, whatever the pattern (PXN only moves traffic among them)."""
    return {n for g in set(local_gpus) for n in affine_nics(nics_per_node, gpus_per_node, g)}


def peer_nics(nics_per_node: int, gpus_per_node: int, src_gpu: int, dst_gpu: int,
              node_gpus: Iterable[int]) -> list[int]:
    """Local NICs a point-to-point transfer from local GPU ``src_gpu`` to a peer on another node (on its
    local GPU ``dst_gpu``) leaves by, its channels spread evenly over them; the destination node receives on
    the same local indices (a rail). ``node_gpus``: the communicator's local GPUs on the source node.

    PXN (NCCL >= 2.12, on by default): ``ncclTopoGetNetDev`` (src/graph/paths.cc) looks for a rank of the
    communicator on the source node on the peer's device index; when there is one, the data crosses NVLink
    to it and leaves by its NIC (the peer's rail), else by the source GPU's own (:func:`affine_nics`).
    """
    via = dst_gpu if dst_gpu in set(node_gpus) else src_gpu
    return affine_nics(nics_per_node, gpus_per_node, via)


def nic_share(nics_per_node: int, gpus_per_node: int, node_groups: list[set[int]]) -> float:
    """NICs' worth of one node's compute bandwidth the first of ``node_groups`` gets: every group that
    crosses the network from this node (as the local GPUs of its members here) uses :func:`group_nics`, and
    each NIC is shared evenly by the groups using it. One group of one rank per node on a node of 8 GPUs and
    8 NICs: 1 NIC, not 8; eight such groups: 1 each; on 2 NICs, eight such groups: 1/4 each."""
    sets = [group_nics(nics_per_node, gpus_per_node, g) for g in node_groups]
    users: dict[int, int] = {}
    for s in sets:
        for n in s:
            users[n] = users.get(n, 0) + 1
    return sum(1.0 / users[n] for n in sets[0]) if sets else float(nics_per_node)
