"""The doctor and the inventory on the emulated cluster (``slowlink emulate up``), bottom-up like on a real one:

1. link: each node link's shaper rate (``tc qdisc show``, the emulation's ``ibstat Rate``) against the nominal
   rate the cluster was brought up with; then a measured TCP stream in and out of every node at once (a ring,
   ``emulate.measure.throughput``): a node whose in- and out-streams are both below nominal is the slow link
   (a stream is limited by its slower end, so only the slow node is slow both ways);
2. collective: a gloo all_reduce across the nodes, its busbw against the collective model's prediction for the
   cluster as emulated (``emulate.validate.emulated_cluster``) when a cluster file is given.

Needs root, like every emulate command.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slowlink import units
from slowlink.emulate.plan import Plan
from slowlink.errors import EmulationError
from slowlink.observe.checks import Finding
from slowlink.observe.inventory import NodeRecord, tbf_rate_mbit_s

if TYPE_CHECKING:
    from slowlink.progress import OnStep

PROBE_SIZE_BYTES = 4 * units.MiB  # bandwidth-bound at the emulated rates (0.3-1 s at 100 Mbit/s), like issue 13
PROBE_ITERS = 2


def node_links(plan: Plan) -> list[Any]:
    """The links from a node to its switch (``n<k>`` / ``n<k>r<r>``), in node order."""
    return [x for x in plan.links if x.name.startswith("n")]


def shaped_mbit_s(link: Any) -> float | None:
    """The tbf rate the link's node end is shaped to (``tc qdisc show`` inside the node's namespace)."""
    from slowlink.emulate.net import nsx

    return tbf_rate_mbit_s(nsx(link.a, "tc", "qdisc", "show", "dev", link.dev_a).stdout)


def check_shapers(plan: Plan, tolerance: float) -> list[Finding]:
    """A node link shaped below the nominal rate (what ``emulate rate`` changes): the port trained slow."""
    nominal = plan.node_rate_bytes_s / units.Mbit
    out = []
    links = node_links(plan)
    for link in links:
        got = shaped_mbit_s(link)
        if got is not None and got < nominal * (1 - tolerance):
            out.append(Finding("link", "error", f"link {link.name} ({link.a} {link.dev_a}) is shaped to {got:g} "
                               f"Mbit/s, below its nominal {nominal:g} Mbit/s",
                               (f"ip netns exec {link.a} tc qdisc show dev {link.dev_a}: tbf rate {got:g}Mbit",),
                               f"slowlink emulate rate {link.name} {nominal:g}  (on a real cluster: replace the "
                               "cable or transceiver of a port that trained slow)"))
    return out or [Finding("link", "ok", f"{len(links)} node links shaped to their nominal {nominal:g} Mbit/s")]


def check_throughput(plan: Plan, tolerance: float, duration_s: float = 1.5) -> list[Finding]:
    """Streams k -> k+1 on every node at once; a node with both its streams slow is named."""
    n = len(plan.nodes)
    if n < 2:
        return []
    from slowlink.emulate.measure import throughput

    ring = [(k, (k + 1) % n) for k in range(n)]
    rates = throughput(plan, ring, duration_s)
    # TCP payload per frame that tbf counts (emulate/validate.py): the most one stream can carry.
    from slowlink.emulate.validate import TCP_PAYLOAD_FRACTION

    ceiling = plan.node_rate_bytes_s * TCP_PAYLOAD_FRACTION
    out: list[Finding] = []
    for k in range(n):
        sent, got = rates[k], rates[(k - 1) % n]
        if max(sent, got) < ceiling * (1 - tolerance):
            name = node_links(plan)[k].name
            out.append(Finding("link", "error", f"link {name} (node {k}) carries {max(sent, got) / units.MB:.2f} "
                               f"MB/s each way, {100 * max(sent, got) / ceiling:.0f}% of its "
                               f"{ceiling / units.MB:.2f} MB/s",
                               (f"stream n{k}->n{(k + 1) % n}: {sent / units.MB:.2f} MB/s",
                                f"stream n{(k - 1) % n}->n{k}: {got / units.MB:.2f} MB/s",
                                f"median of all {n} streams: {statistics.median(rates) / units.MB:.2f} MB/s"),
                               "the slow link is the one both of its streams share: check its port rate"))
    if not out:
        out.append(Finding("link", "ok", f"{n} node links carry >= {100 * (1 - tolerance):.0f}% of "
                           f"{ceiling / units.MB:.2f} MB/s", tuple(f"stream n{a}->n{b}: {r / units.MB:.2f} MB/s"
                                                                     for (a, b), r in zip(ring, rates, strict=True))))
    return out


def check_collective(plan: Plan, cluster_path: Path | None, tolerance: float) -> list[Finding]:
    """An all_reduce of :data:`PROBE_SIZE_BYTES`: measured busbw against the model's for the emulated cluster."""
    from slowlink.collectives import predict
    from slowlink.collectives.ops import busbw_factor
    from slowlink.emulate.measure import collective

    n = len(plan.nodes)
    times = collective(plan, "all_reduce", PROBE_SIZE_BYTES, iters=PROBE_ITERS)
    t = statistics.median(times)
    busbw = PROBE_SIZE_BYTES * busbw_factor("all_reduce", n) / t
    ev = f"all_reduce {PROBE_SIZE_BYTES / units.MiB:g} MiB x{n}: {t:.3f} s, busbw {busbw / units.MB:.2f} MB/s"
    if cluster_path is None:
        return [Finding("collective", "ok", "all_reduce measured (give --cluster to compare with the model)", (ev,))]
    from slowlink.emulate.validate import emulated_cluster
    from slowlink.spec.cluster import load_cluster

    want = predict(emulated_cluster(load_cluster(cluster_path), plan), "all_reduce", PROBE_SIZE_BYTES)
    ratio = busbw / want.busbw_bytes_s
    ev += f"; predicted {want.time_s:.3f} s, busbw {want.busbw_bytes_s / units.MB:.2f} MB/s ({100 * ratio:.0f}%)"
    if ratio < 1 - tolerance:
        return [Finding("collective", "error" if ratio < 0.5 else "warning",
                        f"all_reduce busbw {100 * (1 - ratio):.0f}% below the model", (ev,),
                        "look lower: the slow link above")]
    return [Finding("collective", "ok", f"all_reduce busbw within {100 * tolerance:.0f}% of the model", (ev,))]


def probe(run_id: str, cluster_path: Path | None, tolerance: float,
          on_step: OnStep | None = None) -> list[Finding]:
    """Every emulated check, bottom-up; ``on_step`` is told as each of the three begins."""
    from slowlink.emulate.net import check_root, current

    step = on_step or (lambda what: None)
    check_root()
    plan = current(run_id)
    step("shapers")
    found = check_shapers(plan, tolerance)
    step("throughput")
    found += check_throughput(plan, tolerance)
    step("collective")
    return [*found, *check_collective(plan, cluster_path, tolerance)]


def inventory(run_id: str, on_step: OnStep | None = None) -> list[NodeRecord]:
    """``python -m slowlink.observe.inventory`` in every node of the emulation, host named ``n<k>``;
    ``on_step`` is told as the wait for each node's answer begins."""
    from slowlink.emulate.net import check_root, current, package_env

    check_root()
    plan = current(run_id)
    procs = [subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-m", "slowlink.observe.inventory"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=package_env())
             for ns in plan.nodes]
    out = []
    for k, p in enumerate(procs):
        if on_step is not None:
            on_step(f"node {k} of {len(procs)}")
        stdout, stderr = p.communicate(timeout=180)
        if p.returncode != 0:
            raise EmulationError(f"inventory in node {k} failed: {stderr.strip()[-300:]}")
        out.append(NodeRecord.from_json(json.loads(stdout), f"inventory of node {k}").renamed(f"n{k}"))
    return out


__all__ = ["check_collective", "check_shapers", "check_throughput", "inventory", "probe"]
