"""`find-slow` on the emulated cluster: bring it up healthy, time a gloo collective, break the parts the
cluster file's ``degraded:`` names (a NIC link reshaped to its ``rate``, a node's links delayed by its
``delay_ms``), probe every link blind (:mod:`slowlink.probe.find`: the probes see only node addresses,
never the plan's link states), time the collective again and predict both times with the models on the
cluster as emulated (:func:`slowlink.emulate.validate.emulated_cluster`) with the same degraded parts.

The whole run is bounded by its steps: one ``up``, two collectives of ``iters`` timed iterations, two
bandwidth rounds of ``probe_s`` each and ~12 round-trip probes, one ``down`` (always, also on failure).
A slow GPU (``clock``) has no emulated counterpart here (the ranks are CPU processes) and is listed in
``not_emulated``.
"""

from __future__ import annotations

import json
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slowlink.collectives import predict
from slowlink.emulate import net
from slowlink.emulate.measure import rtt_s, throughput
from slowlink.emulate.plan import DEFAULT_SCALE, Plan, build_plan
from slowlink.emulate.validate import TCP_PAYLOAD_FRACTION, emulated_cluster
from slowlink.errors import EmulationError, field_error
from slowlink.probe.find import Suspect, delayed_nodes, probe_pairs, rtt_pairs, slow_links
from slowlink.sim.collectives import simulate_collective
from slowlink.spec.cluster import Cluster
from slowlink.spec.degraded import DegradedPart, resolve_degraded
from slowlink.straggler.degraded import healthy

if TYPE_CHECKING:
    from slowlink.progress import OnStep


@dataclass(frozen=True)
class FindSlowResult:
    """What the probes named, against what was broken, and the collective measured and predicted."""

    suspects: tuple[Suspect, ...]
    injected: tuple[str, ...]
    not_emulated: tuple[str, ...]
    op: str
    size_bytes: float
    measured_healthy_s: float
    measured_degraded_s: float
    predicted_s: dict[str, tuple[float, float]]  # fidelity -> (healthy, degraded) seconds
    streams: tuple[tuple[int, int, float], ...]
    rtts: tuple[tuple[int, int, float], ...]
    wall_s: float
    rank_median_s: tuple[tuple[float, ...], tuple[float, ...]] = ((), ())  # each rank's own median, healthy
                                                                            # and degraded (worker.py)
    predicted_from_found_s: dict[str, float] | None = None  # fidelity -> degraded time, from the suspects

    @property
    def measured_slowdown(self) -> float:
        return self.measured_degraded_s / self.measured_healthy_s - 1.0

    def predicted_slowdown(self, fidelity: str) -> float:
        h, d = self.predicted_s[fidelity]
        return d / h - 1.0

    def to_json(self) -> dict[str, Any]:
        return {"suspects": [s.to_json() for s in self.suspects], "injected": list(self.injected),
                "not_emulated": list(self.not_emulated), "op": self.op, "size_bytes": self.size_bytes,
                "measured_healthy_s": self.measured_healthy_s, "measured_degraded_s": self.measured_degraded_s,
                "measured_slowdown": self.measured_slowdown,
                "predicted": {f: {"healthy_s": h, "degraded_s": d, "slowdown": d / h - 1.0}
                              for f, (h, d) in self.predicted_s.items()},
                "streams": [{"src": a, "dst": b, "mbit_s": r * 8e-6} for a, b, r in self.streams],
                "rtts": [{"a": a, "b": b, "rtt_ms": t * 1e3} for a, b, t in self.rtts], "wall_s": self.wall_s,
                "rank_median_s": {"healthy": list(self.rank_median_s[0]), "degraded": list(self.rank_median_s[1])},
                "predicted_from_found_s": self.predicted_from_found_s}


def new_run_id() -> str:
    """A run id of this tool's own (``sw`` + 4 hex digits), so that its namespaces are told apart."""
    return f"sw{secrets.token_hex(2)}"


def _link(plan: Plan, node: int, rail: int) -> str:
    return f"n{node}" if plan.rails == 1 else f"n{node}r{rail}"


def inject(plan: Plan, cluster: Cluster) -> tuple[Plan, list[str], list[str]]:
    """Break the emulated links as ``cluster.degraded`` says; (new plan, what was done, what cannot be)."""
    d = cluster.degraded
    done, skipped = [], []
    for (node, nic), rate in sorted(d.nic_rate.items()):
        name = _link(plan, node, nic)
        plan = net.set_rate(plan, name, plan.link(name).rate_bytes_s * rate)
        done.append(f"link {name} at {rate:.0%}")
    for node, delay in sorted(d.node_delay_s.items()):
        for r in range(plan.rails):
            plan = net.impair(plan, _link(plan, node, r), delay_s=delay)
        done.append(f"node n{node} +{delay * 1e3:g} ms one way")
    skipped += [f"link {name} (fabric cables are not emulated one by one)" for name in d.link_rate]
    skipped += [f"node {n} GPU {g} at {c:.0%} clock (ranks are CPU processes)" for (n, g), c in d.gpu_clock.items()]
    return plan, done, skipped


def probe(plan: Plan, expected_bytes_s: float, probe_s: float = 1.5
          ) -> tuple[list[Suspect], list[tuple[int, int, float]], list[tuple[int, int, float]]]:
    """Round trips, then bandwidth rounds between node addresses; the suspects they name, and the raw data.
    ``expected_bytes_s`` is a link's datasheet goodput (the cluster file's, not the emulation's state)."""
    n = len(plan.nodes)
    rtts = [(a, b, rtt_s(plan, a, b, tries=3)) for a, b in rtt_pairs(n)]
    late = delayed_nodes(rtts)
    streams: list[tuple[int, int, float]] = []
    for rnd in probe_pairs(n):
        rates = throughput(plan, rnd, duration_s=probe_s)
        streams += [(a, b, r) for (a, b), r in zip(rnd, rates, strict=True)]
    link_name = "n{k}" if plan.rails == 1 else "n{k}r0"
    skip = frozenset(int(s.id[1:]) for s in late)
    return [*slow_links(streams, expected_bytes_s, link_name, skip), *late], streams, rtts


def _wait_for(path: Path, procs: list[subprocess.Popen[bytes]], timeout_s: float) -> dict[str, Any]:
    end = time.monotonic() + timeout_s
    while not path.exists():
        if any(p.poll() not in (None, 0) for p in procs) or time.monotonic() > end:
            raise EmulationError(f"the gloo ranks did not write {path.name} (exit codes "
                                 f"{[p.poll() for p in procs]})")
        time.sleep(0.1)
    time.sleep(0.05)  # rank 0 has closed the file
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _time_s(cluster: Cluster, fidelity: str, op: str, size_bytes: float) -> float:
    if fidelity == "flow":
        return simulate_collective(cluster, op, size_bytes)[0].time_s
    return predict(cluster, op, size_bytes).time_s


def parts_from_suspects(suspects: tuple[Suspect, ...] | list[Suspect]) -> list[DegradedPart]:
    """What the probes found, as degraded parts: link ``n<k>`` at its measured share of the rate (NIC 0),
    node ``n<k>`` with its measured one-way delay."""
    out = []
    for s in suspects:
        if s.kind not in ("link", "node") or not s.id.startswith("n"):
            continue
        node = int(s.id[1:].split("r")[0])
        if s.unit == "share":
            out.append(DegradedPart(node=node, nic=0, rate=min(1.0, max(1e-3, s.slowdown))))
        elif s.unit == "delay_s":
            out.append(DegradedPart(node=node, delay_ms=s.slowdown * 1e3))
    return out


def predicted(cluster: Cluster, plan: Plan, op: str, size_bytes: float,
              found: list[DegradedPart] | None = None) -> dict[str, tuple[float, float]]:
    """(healthy, degraded) time of ``op`` on the cluster as emulated, by both models; degraded by the file's
    parts, or by ``found`` (what the probes named) when given."""
    scaled = emulated_cluster(healthy(cluster), plan)
    parts = found if found is not None else \
        [p for p in cluster.degraded_parts if p.nic is not None or p.delay_ms is not None]
    broken = replace(scaled, degraded=resolve_degraded(parts, scaled.gpus_per_node))
    return {f: (_time_s(scaled, f, op, size_bytes), _time_s(broken, f, op, size_bytes))
            for f in ("flow", "analytical")}


def find_slow_emulated(cluster: Cluster, *, op: str = "all_reduce", size_bytes: float = 2**20, iters: int = 3,
                       scale: float | None = None, run_id: str | None = None, probe_s: float = 1.5,
                       timeout_s: float = 110.0, on_step: OnStep | None = None) -> FindSlowResult:
    """Up, start the ranks and time the collective healthy, inject ``cluster.degraded``, probe, time it
    degraded in the same ranks, predict, down (always). ``on_step`` is told as each of these phases begins."""
    step = on_step or (lambda what: None)
    if not cluster.degraded:
        raise EmulationError(field_error("degraded", [], "is empty: name the parts to break in the cluster file"))
    if cluster.nodes < 5:
        raise EmulationError(field_error("nodes", cluster.nodes, "must be >= 5: the probes' median must be "
                                         "a healthy link when one node's four probes are slow"))
    t0 = time.monotonic()
    plan = build_plan(healthy(cluster), scale=DEFAULT_SCALE if scale is None else scale,
                      run_id=run_id or new_run_id())
    clean = plan
    pred = predicted(cluster, clean, op, size_bytes)
    expected = plan.node_rate_bytes_s * TCP_PAYLOAD_FRACTION
    step(f"bring-up ({cluster.nodes} nodes)")
    net.up_owned(plan)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            prefix, go = Path(tmp) / "times", Path(tmp) / "go"
            procs = net.spawn(plan, [sys.executable, "-m", "slowlink.probe.worker", op, str(size_bytes),
                                     str(iters), str(prefix), str(go)])
            step(f"{op} healthy")
            before = _wait_for(Path(f"{prefix}.healthy.json"), procs, timeout_s)
            step("inject and probe")
            plan, done, skipped = inject(plan, cluster)
            suspects, streams, rtts = probe(plan, expected, probe_s)
            step(f"{op} degraded")
            go.touch()
            after = _wait_for(Path(f"{prefix}.degraded.json"), procs, timeout_s)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        step("tear-down")
        net.down(plan.run_id)
    ranks = tuple(tuple(statistics.median(r) for r in x["rank_times_s"]) for x in (before, after))
    # On the plan as built (healthy): the broken one's delays would read as every path's latency.
    found = {f: d for f, (_, d) in predicted(cluster, clean, op, size_bytes, parts_from_suspects(suspects)).items()}
    return FindSlowResult(tuple(suspects), tuple(done), tuple(skipped), op, size_bytes,
                          statistics.median(before["times_s"]), statistics.median(after["times_s"]), pred,
                          tuple(streams), tuple(rtts), time.monotonic() - t0, (ranks[0], ranks[1]), found)
