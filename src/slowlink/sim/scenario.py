"""Multi-traffic scenarios: several collectives and checkpoint bursts on one fabric at once.

A scenario file names a cluster file and a list of traffics. Each collective is expanded into the phases
of the analytical model's algorithm (:mod:`slowlink.sim.flows`); unlike ``simulate_collective`` the steps
are *chained* (not multiplied), so background traffic that comes and goes changes each step: a phase of
``s`` steps becomes ``k = min(s, 32)`` copies of ``s / k`` steps' bytes each, separated by barriers (a
zero-byte flow that waits for every flow of the copy, plus the copy's per-step latency). Shortcut: the
barrier makes a copy wait for its slowest rank (NCCL's ranks drift apart by at most one chunk).
Every traffic is also run alone, so its slowdown is measured against the same model.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from slowlink.collectives.ops import check_algorithm_applies
from slowlink.errors import SpecError
from slowlink.sim.checkpoint import checkpoint_flows
from slowlink.sim.collectives import SIMULATED, choose_algorithm
from slowlink.sim.engine import Flow, SimResult, simulate
from slowlink.sim.flows import phases
from slowlink.spec.cluster import Cluster, load_cluster
from slowlink.spec.scenario import Scenario, Traffic, read_scenario
from slowlink.topology.build import build
from slowlink.topology.fabric import Topology

# Algorithms that reduce inside the NVLink switches (NVLink SHARP): they need a scale-up link whose catalog
# entry has `sharp: true` (NVLS came with NCCL 2.17.1 for H100 NVSwitch systems, NVLS-tree with 2.18.1:
# NCCL release notes; third-generation NVSwitch, A100, has no in-switch reduction).
NEEDS_SHARP = ("nvls", "nvls_tree")
MAX_COPIES = 32


@dataclass(frozen=True)
class TrafficResult:
    name: str
    kind: str
    algorithm: str
    start_s: float
    finish_s: float
    alone_s: float
    bytes: float

    @property
    def duration_s(self) -> float:
        return self.finish_s - self.start_s


@dataclass(frozen=True)
class ScenarioResult:
    name: str
    traffic: list[TrafficResult]
    sim: SimResult
    link_names: list[str]


def _ranks(t: Traffic, cluster: Cluster, where: str) -> list[int]:
    if t.ranks is not None:
        bad = [r for r in t.ranks if not 0 <= r < cluster.gpus]
        if bad or len(set(t.ranks)) != len(t.ranks) or len(t.ranks) < 2:
            raise SpecError(f"{where}.ranks ({list(t.ranks)!r}) must be >= 2 distinct ranks in "
                            f"0..{cluster.gpus - 1}")
        return list(t.ranks)
    if t.first_rank is not None or t.count is not None:
        first, count = t.first_rank or 0, t.count or cluster.gpus - (t.first_rank or 0)
        if first + count > cluster.gpus or count < 2:
            raise SpecError(f"{where}: first_rank ({first}) + count ({count}) must be <= the cluster's GPUs "
                            f"({cluster.gpus}) and count >= 2")
        return list(range(first, first + count))
    return list(range(cluster.gpus))


def _chain(phs: list[Any], start: float, tag: str, base: int) -> list[Flow]:
    """Phases as chained copies with barrier flows (indices offset by ``base`` in the final list)."""
    out: list[Flow] = []
    prev: tuple[int, ...] = ()
    for ph in phs:
        k = max(1, min(ph.steps, MAX_COPIES))
        scale = ph.steps / k
        for _ in range(k):
            ids = []
            for f in ph.flows:
                ids.append(base + len(out))
                out.append(Flow(f.path, f.size_bytes * scale, start, tag, prev))
            out.append(Flow((), 0.0, start, tag, tuple(ids), scale * ph.step_latency_s))
            prev = (base + len(out) - 1,)
    return out


def _flows(t: Traffic, cluster: Cluster, topo: Topology, where: str, base: int) -> tuple[list[Flow], str]:
    check_traffic(t, cluster, where)
    start = t.start_s
    if t.kind == "checkpoint":
        assert t.bytes_per_node is not None  # check_traffic
        return [Flow(f.path, f.size_bytes, start, t.name) for f in
                checkpoint_flows(topo, cluster.nodes, t.bytes_per_node)], "checkpoint"
    assert t.op is not None and t.size_bytes is not None  # check_traffic
    ranks = _ranks(t, cluster, where)
    size = t.size_bytes
    groups = [[ranks[0], ranks[-1]]] if t.op == "send_recv" else [ranks]
    algo = t.algorithm or choose_algorithm(cluster, topo, t.op, size, groups).algorithm
    return _chain(phases(topo, t.op, algo, groups, size), start, t.name, base), algo


def check_traffic(t: Traffic, cluster: Cluster, where: str) -> None:
    """What a traffic needs of its kind and of the cluster, checked before any flow is built."""
    if t.kind == "checkpoint":
        if t.bytes_per_node is None:
            raise SpecError(f"{where}.bytes_per_node (None) is required for kind checkpoint")
        return
    if t.op is None or t.size_bytes is None:
        raise SpecError(f"{where}: op ({t.op!r}) and size ({t.size_bytes!r}) are required for kind collective "
                        f"(op: one of {', '.join(SIMULATED)})")
    _ranks(t, cluster, where)
    check_algorithm_applies(t.op, t.algorithm, f"{where}.algorithm")
    if t.algorithm in NEEDS_SHARP and not cluster.scale_up.sharp:
        raise SpecError(f"{where}.algorithm ({t.algorithm!r}) needs NVLink SHARP, which cluster {cluster.name}'s "
                        f"scale-up link ({cluster.scale_up.link.name}) does not have: use ring or tree, or "
                        "leave it out for the model's pick")


def check_scenario(spec: Scenario, cluster: Cluster, source: str = "scenario") -> None:
    """Every traffic of ``spec`` against ``cluster``; the first problem is a :class:`SpecError` naming
    ``source``."""
    for i, t in enumerate(spec.traffic):
        try:
            check_traffic(t, cluster, f"traffic.{i}")
        except SpecError as exc:
            raise SpecError(f"{source}: {exc}") from None


def run_scenario(spec: Scenario, cluster: Cluster) -> ScenarioResult:
    """Every traffic together, then each alone; per traffic its time, alone time and bytes."""
    check_scenario(spec, cluster, spec.name)
    topo = build(cluster)
    all_flows: list[Flow] = []
    spans: list[tuple[int, int, str]] = []
    alone: list[float] = []
    for i, t in enumerate(spec.traffic):
        flows, algo = _flows(t, cluster, topo, f"traffic.{i}", len(all_flows))
        own, _ = _flows(t, cluster, topo, f"traffic.{i}", 0)
        alone.append(simulate(topo.capacity_bytes_s, topo.latency_s, own).makespan_s)
        spans.append((len(all_flows), len(all_flows) + len(flows), algo))
        all_flows += flows
    res = simulate(topo.capacity_bytes_s, topo.latency_s, all_flows)
    out = []
    for t, (a, b, algo), al in zip(spec.traffic, spans, alone, strict=True):
        out.append(TrafficResult(t.name, t.kind, algo, float(res.start_s[a:b].min()),
                                 float(res.finish_s[a:b].max()), al, float(sum(f.size_bytes for f in all_flows[a:b]))))
    return ScenarioResult(spec.name, out, res, topo.names)


def load_scenario(path: Path | str) -> tuple[Scenario, Cluster]:
    """Read and validate a scenario file and its cluster, and check its traffics against the cluster; every
    failure names the field."""
    spec, source = read_scenario(path)
    cluster = load_cluster(Path(path).parent / spec.cluster)
    check_scenario(spec, cluster, source)
    return spec, cluster


@dataclass(frozen=True)
class LinkLoad:
    """One link over a scenario: its mean utilisation while traffic ran, its peak, and the bytes it carried."""

    link: str
    mean_utilisation: float
    peak_utilisation: float
    bytes: float

    def to_json(self) -> dict[str, object]:
        return {"link": self.link, "mean_utilisation": self.mean_utilisation,
                "peak_utilisation": self.peak_utilisation, "bytes": self.bytes}


def link_loads(result: ScenarioResult) -> list[LinkLoad]:
    """Every link that carried bytes, in the topology graph's order."""
    util, sim = result.sim.busy_utilisation(), result.sim
    return [LinkLoad(result.link_names[i], float(util[i]), float(sim.peak_utilisation[i]), float(sim.link_bytes[i]))
            for i in np.flatnonzero(sim.link_bytes > 0)]


def hottest(result: ScenarioResult, k: int = 10) -> list[LinkLoad]:
    """The ``k`` links with the highest mean utilisation over the run (those that carried bytes)."""
    util, sim = result.sim.busy_utilisation(), result.sim
    order = np.argsort(-util, kind="stable")[:k]
    return [LinkLoad(result.link_names[i], float(util[i]), float(sim.peak_utilisation[i]), float(sim.link_bytes[i]))
            for i in order if sim.link_bytes[i] > 0]
