"""Collective operations: nccl-tests' size convention and bus-bandwidth factors (doc/PERFORMANCE.md)."""

from __future__ import annotations

from slowlink.collectives.constants import P2P_LL_THRESHOLD_BYTES, P2P_PROTOCOLS
from slowlink.errors import SpecError

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce", "send_recv")
# The ops whose algorithm NCCL chooses, and NCCL_ALGO can force (ring, tree, collnet, nvls, pat): NCCL's
# collectives (src/enqueue.cc picks an algorithm per collective task from the tuning model). all_to_all and
# send_recv are point-to-point: nccl-tests builds all_to_all from grouped ncclSend/ncclRecv
# (src/alltoall.cu), and NCCL runs send/recv on its p2p path, where no algorithm is chosen.
ALGORITHM_OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce")
# What the model names the way all_to_all and send_recv run (algorithms.py): the only "algorithm" they have.
P2P = "p2p"


def check_op(op: str) -> str:
    """The op name, or a :class:`SpecError` naming the known ones."""
    if op not in OPS:
        raise SpecError(f"op ({op!r}) is not a collective: use one of {', '.join(OPS)}")
    return op


def check_algorithm_applies(op: str, algorithm: str | None, field: str = "algorithm") -> None:
    """A :class:`SpecError` when an algorithm is forced on an op that has no algorithm choice (all_to_all,
    send_recv: point-to-point in NCCL, see ``ALGORITHM_OPS``), rather than silently ignoring it; ``P2P``, the
    name the model gives their own way (a prediction's ``algorithm``), may be passed back."""
    if algorithm not in (None, P2P) and op not in ALGORITHM_OPS:
        raise SpecError(f"{field} ({algorithm!r}) does not apply to {op}: NCCL_ALGO selects an algorithm for "
                        f"{', '.join(ALGORITHM_OPS)} only, and {op} is point-to-point sends and receives")


def p2p_bytes_per_peer(op: str, size: float, ranks: int) -> float:
    """What one send carries: all_to_all sends size / n to each peer (nccl-tests alltoall), send_recv all."""
    return size / max(ranks, 1) if op == "all_to_all" else size


def p2p_protocol(bytes_per_peer: float) -> str:
    """The protocol NCCL runs a point-to-point transfer with: LL up to P2P_LL_THRESHOLD, else Simple
    (constants.P2P_LL_THRESHOLD_BYTES, from src/enqueue.cc addP2pToPlan)."""
    return "LL" if bytes_per_peer <= P2P_LL_THRESHOLD_BYTES else "Simple"


def check_protocol_applies(op: str, protocol: str | None, field: str = "protocol") -> None:
    """A :class:`SpecError` when a protocol NCCL never runs point-to-point (LL128) is forced on all_to_all or
    send_recv, rather than pricing a transfer NCCL would not make."""
    if protocol is not None and op not in ALGORITHM_OPS and protocol not in P2P_PROTOCOLS:
        raise SpecError(f"{field} ({protocol!r}) does not apply to {op}: NCCL sends point-to-point with LL up to "
                        f"P2P_LL_THRESHOLD ({P2P_LL_THRESHOLD_BYTES} B per peer) and Simple above, never LL128; "
                        f"force one of {', '.join(P2P_PROTOCOLS)}")


def busbw_factor(op: str, ranks: int) -> float:
    """busbw / algbw by nccl-tests' doc/PERFORMANCE.md.

    all_reduce: 2(n-1)/n; all_gather, reduce_scatter, all_to_all: (n-1)/n;
    broadcast, reduce, send_recv: 1. The factor makes busbw comparable to the link's speed.
    """
    n = max(ranks, 1)
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


def ring_steps(op: str, ranks: int) -> int:
    """Ring steps NCCL charges latency for (tuning.cc ``nsteps``).

    all_reduce 2(n-1) (reduce-scatter then all-gather); all_gather / reduce_scatter n-1;
    broadcast / reduce a pipeline of n-1 hops; all_to_all / send_recv 1 (all peers at once).
    """
    if op == "all_reduce":
        return 2 * (ranks - 1)
    if op in ("all_gather", "reduce_scatter", "broadcast", "reduce"):
        return ranks - 1
    return 1


def inter_steps(op: str, domains: int) -> int:
    """Of the ring steps, how many cross the network (tuning.cc ``nInterSteps``), for ``domains`` > 1."""
    if domains <= 1:
        return 0
    return 2 * (domains - 1) if op == "all_reduce" else domains - 1
