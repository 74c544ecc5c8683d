"""One dispatch between slowlink's two fidelities, and the checked query behind ``slowlink collective``.

``analytical`` prices a collective with the closed-form NCCL model (``slowlink.collectives``); ``flow``
simulates it flow by flow on the cluster's topology graph (``slowlink.sim``). Both answer with the same
:class:`~slowlink.collectives.Prediction`, so reports and comparisons do not care which ran. The flow side
(networkx, the engine) is imported only when asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from slowlink import units
from slowlink.errors import SpecError

if TYPE_CHECKING:
    from slowlink.collectives import Prediction
    from slowlink.spec.cluster import Cluster
    from slowlink.workload.comm import CommCost

FIDELITIES = ("analytical", "flow")


def check_fidelity(fidelity: str, flag: str = "--fidelity") -> str:
    if fidelity not in FIDELITIES:
        raise SpecError(f"{flag} ({fidelity!r}) must be one of {', '.join(FIDELITIES)}")
    return fidelity


def comm_cost(fidelity: str, cluster: Cluster) -> CommCost | None:
    """What prices the step's collectives: None for the analytical model (the step model's default), or the
    flow simulator's cost function on ``cluster``'s graph."""
    if check_fidelity(fidelity) == "analytical":
        return None
    from slowlink.sim.step import flow_cost

    cost: CommCost = flow_cost(cluster)
    return cost


@dataclass(frozen=True)
class CollectiveQuery:
    """One ``slowlink collective`` question, checked: an op at some sizes over some ranks, at a fidelity,
    optionally with NCCL's algorithm or protocol forced (as ``NCCL_ALGO`` / ``NCCL_PROTO`` would)."""

    op: str
    sizes: tuple[float, ...]
    dtype: str = "float"
    ranks: int | None = None
    fidelity: str = "analytical"
    algorithm: str | None = None
    protocol: str | None = None

    @classmethod
    def from_options(cls, op: str, size: str | None, sweep: str | None, minbytes: str | None,
                     maxbytes: str | None, stepfactor: float | None, **rest: object) -> CollectiveQuery:
        """From the command's options: exactly one of ``--size``, ``--sweep MIN:MAX:FACTOR`` or nccl-tests'
        ``-b/-e/-f``; every option checked, each error naming its flag, value and rule."""
        from slowlink.collectives.constants import ALGORITHMS, EXPLICIT_ALGORITHMS, PROTOCOLS
        from slowlink.collectives.ops import check_algorithm_applies, check_op, check_protocol_applies
        from slowlink.spec.bounds import COLLECTIVE_BYTES

        given = [name for name, v in (("--size", size), ("--sweep", sweep)) if v is not None]
        if minbytes is not None or maxbytes is not None or stepfactor is not None:
            given.append("-b/-e/-f")
        if len(given) != 1:
            raise SpecError("give exactly one of --size (e.g. 1GiB), --sweep (e.g. 8:8GiB:2) or nccl-tests' "
                            f"-b MIN -e MAX [-f FACTOR]; got {', '.join(given) or 'none'}")
        try:
            if size is not None:
                sizes = [units.parse_size(size)]
            elif sweep is not None:
                sizes = units.parse_sweep(sweep)
            else:
                lo, hi = minbytes or maxbytes, maxbytes or minbytes
                sizes = units.parse_sweep(f"{lo}:{hi}:{stepfactor if stepfactor is not None else 2:g}")
        except ValueError as exc:
            raise SpecError(f"{given[0]}: {exc}") from None
        try:
            COLLECTIVE_BYTES.check(max(sizes), given[0])
        except ValueError as exc:
            raise SpecError(str(exc)) from None
        q = cls(op=op, sizes=tuple(sizes), **rest)  # type: ignore[arg-type]
        check_op(q.op)
        if q.dtype not in units.DTYPE_BYTES:
            raise SpecError(f"-d/--datatype ({q.dtype!r}) is not one of {', '.join(units.DTYPE_BYTES)}")
        elem = units.DTYPE_BYTES[q.dtype]
        if min(q.sizes) < elem:
            raise SpecError(f"{given[0]} ({min(q.sizes):g} B) must be >= one {q.dtype} element ({elem} B): a "
                            "smaller size has a count of 0")
        check_fidelity(q.fidelity)
        if q.algorithm is not None and q.algorithm not in ALGORITHMS + EXPLICIT_ALGORITHMS:
            raise SpecError(f"--algorithm ({q.algorithm!r}) must be one of "
                            f"{', '.join(ALGORITHMS + EXPLICIT_ALGORITHMS)}")
        check_algorithm_applies(q.op, q.algorithm, "--algorithm")
        if q.protocol is not None and q.protocol not in PROTOCOLS:
            raise SpecError(f"--protocol ({q.protocol!r}) must be one of {', '.join(PROTOCOLS)}")
        check_protocol_applies(q.op, q.protocol, "--protocol")
        if q.protocol is not None and q.fidelity == "flow":
            raise SpecError("--protocol applies to --fidelity analytical only: the flow simulator moves bytes, "
                            "not LL/LL128 packets")
        return q


def predict_collective(cluster: Cluster, q: CollectiveQuery,
                       progress: Callable[[Sequence[float], str], Iterable[float]] | None = None) -> list[Prediction]:
    """The query's predictions, one per size, at its fidelity (block placement, the first ``ranks`` GPUs);
    ``progress`` wraps the flow simulator's sizes (the CLI's progress bar; the library draws nothing)."""
    if q.ranks is not None and not 1 <= q.ranks <= cluster.gpus:
        raise SpecError(f"--ranks ({q.ranks}) must be between 1 and the cluster's GPUs ({cluster.nodes} x "
                        f"{cluster.gpus_per_node} = {cluster.gpus})")
    if q.fidelity == "analytical":
        from slowlink.collectives import predict
        from slowlink.collectives.model import default_group

        group = default_group(cluster, q.ranks)
        return [predict(cluster, q.op, s, group, algorithm=q.algorithm, protocol=q.protocol) for s in q.sizes]
    from slowlink.sim.collectives import simulate_collective
    from slowlink.topology.build import build

    topo = build(cluster)
    gpu_ids = list(range(q.ranks if q.ranks is not None else cluster.gpus))
    each = progress or (lambda sizes, what: iter(sizes))
    try:
        return [simulate_collective(cluster, q.op, s, gpu_ids, topo, algorithm=q.algorithm)[0]
                for s in each(q.sizes, f"flow {q.op}")]
    except ValueError as exc:
        raise SpecError(f"--op {q.op} with --fidelity flow: {exc}") from None
