"""A checkpoint burst's slowdown of gradient sync, through the flow simulator (slowlink.sim.scenario).

Nothing is re-modelled here: the scenario of examples/scenario-ckpt-converged.yaml (a data-parallel ring
all_reduce while every node writes its checkpoint) is built for any cluster and run by
:func:`slowlink.sim.scenario.run_scenario`, which also runs each traffic alone; the slowdown is the
all_reduce's time with the burst over its time alone. On a separate storage fabric no link is shared, so
the slowdown is 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from slowlink.spec.cluster import Cluster


@dataclass(frozen=True)
class ConvergedSlowdown:
    alone_s: float
    with_checkpoint_s: float
    checkpoint_s: float

    @property
    def slowdown(self) -> float:
        return self.with_checkpoint_s / self.alone_s if self.alone_s > 0 else 1.0

    def to_json(self) -> dict[str, float]:
        return {"allreduce_alone_s": self.alone_s, "allreduce_with_checkpoint_s": self.with_checkpoint_s,
                "checkpoint_s": self.checkpoint_s, "slowdown": self.slowdown}


def checkpoint_slowdown(cluster: Cluster, checkpoint_bytes_per_node: float, allreduce_bytes: float,
                        algorithm: str = "ring") -> ConvergedSlowdown:
    """The all_reduce of ``allreduce_bytes`` over every GPU, alone and during a checkpoint burst of
    ``checkpoint_bytes_per_node`` from every node, on ``cluster``'s fabric (flow simulator)."""
    from slowlink.sim.scenario import run_scenario
    from slowlink.spec.scenario import scenario_from_mapping

    spec = scenario_from_mapping({
        "name": "checkpoint-during-allreduce", "cluster": cluster.name,
        "traffic": [{"name": "allreduce", "kind": "collective", "op": "all_reduce", "size": allreduce_bytes,
                     "algorithm": algorithm},
                    {"name": "checkpoint", "kind": "checkpoint", "bytes_per_node": checkpoint_bytes_per_node}]},
        "checkpoint-during-allreduce")
    res = run_scenario(spec, cluster)
    ar, ck = res.traffic
    return ConvergedSlowdown(ar.alone_s, ar.duration_s, ck.duration_s)
