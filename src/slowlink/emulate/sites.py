"""Two sites of the emulated cluster joined by a shaped, delayed long haul, and a DDP or DiLoCo run (fp32 or int8
pseudo-gradients) measured over it against the sites model (``slowlink emulate sites``).

Emulated: each site is a switch namespace (a bridge) with one node on a link at its NIC rate x scale; the long haul
is one veth link between the two site switches, shaped by tbf to a site's egress x scale (all its links as one)
and delayed RTT / 2 each way, with the interconnect's loss, by the frame relay in its middle (:mod:`relay`: this
kernel has no netem). Not emulated: the relay's delay is not netem's (frames wait 0-0.5 ms more for its batching
tick, never reordered); the long haul's own buffering (tbf's 50 ms queue instead); more than one stream per
connection (gloo opens one socket per pair of ranks); the step's GPU compute (a small CPU model, its compute
measured, not planned); RTT is not scaled with the rates (10 ms stays 10 ms).

The prediction is the sites model's (:mod:`slowlink.sites.traffic`, :mod:`slowlink.sites.transport`) on the emulated
long haul: its line rate is the tbf rate x the TCP payload share of a frame (1448 of 1514 bytes, as ``emulate
validate`` counts), its window the namespace's (Linux's 6 MiB), one stream, RTT twice the relay's delay:

  predicted step  = the step's measured compute + (B / R + crossings x RTT / 2) x syncs per step
  DCI bytes       = each site's dci device: frame bytes - 66 per frame (Ethernet 14, IPv4 20, TCP with
                    timestamps 32), over every step of the run (warm-up included; the rendezvous adds a few kB)
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from slowlink import units
from slowlink.emulate import net
from slowlink.emulate.plan import PREFIX, SUBNET, Link, Plan, new_run_id
from slowlink.emulate.validate import TCP_PAYLOAD_FRACTION
from slowlink.errors import EmulationError, field_error
from slowlink.sites.traffic import sync_traffic
from slowlink.sites.transport import egress_rate_bytes_s
from slowlink.spec.cluster import Cluster
from slowlink.spec.sites import LINUX_TCP_WINDOW_BYTES, Interconnect
from slowlink.spec.workload import Sync

TCP_HEADER_BYTES = 14 + 20 + 32  # Ethernet, IPv4, TCP with timestamps: a frame's bytes that are not payload
FP32_BYTES = 4  # the emulated model's parameters and gradients


def site_plan(cluster: Cluster, scale: float, run_id: str | None = None, seed: int = 0) -> Plan:
    """The emulated two sites of ``cluster`` (module docstring): nodes ``n0`` (first site) and ``n1``, site switches
    ``site0`` and ``site1``, links ``n0``, ``n1`` and ``dci``."""
    sites = cluster.sites
    if sites is None or len(sites.sites) != 2:
        raise EmulationError(field_error("sites", 0 if sites is None else len(sites.sites),
                                         "must name 2 sites to emulate the long haul between them"))
    ic = sites.interconnect
    rate = cluster.compute_nics.speed_bytes_s * scale
    dci = ic.egress_bytes_s * scale
    for what, r in (("a node link", rate), ("the long haul", dci)):
        if not 1 * units.Mbit <= r <= 10 * units.Gbit:
            raise EmulationError(field_error("scale", scale, f"gives {what} {r / units.Mbit:g} Mbit/s; choose one "
                                             "giving 1 Mbit/s to 10 Gbit/s"))
    rid = run_id or new_run_id()
    nodes = tuple(f"{PREFIX}{rid}-n{k}" for k in range(2))
    switches = tuple(f"{PREFIX}{rid}-site{k}" for k in range(2))
    links = (Link("n0", nodes[0], "eth0", switches[0], "p0r0", rate),
             Link("n1", nodes[1], "eth0", switches[1], "p1r0", rate),
             Link("dci", switches[0], "dci", switches[1], "dci", dci, 0, ic.rtt_s / 2.0, ic.loss))
    addrs = tuple(SUBNET.format(net=0, host=k + 1) for k in range(2))
    return Plan(rid, nodes, switches, links, addrs, rate, scale, "sites", 1, 1, seed)


def emulated_interconnect(cluster: Cluster, plan: Plan) -> Interconnect:
    """The long haul as the emulation builds it, for the sites model (module docstring)."""
    if cluster.sites is None:
        raise EmulationError(field_error("sites", None, "must be given to emulate a long haul"))
    dci = plan.link("dci")
    return replace(cluster.sites.interconnect, links=1, link_bytes_s=dci.rate_bytes_s * TCP_PAYLOAD_FRACTION,
                   rtt_s=2.0 * dci.delay_s, loss=dci.loss, transport="tcp", window_bytes=LINUX_TCP_WINDOW_BYTES,
                   streams_per_connection=1)


@dataclass(frozen=True)
class Predicted:
    """The sites model's answer for the emulated run: one sync's seconds, syncs per step, bytes leaving a site
    per step."""

    sync_s: float
    syncs_per_step: float
    bytes_per_step: float

    def step_s(self, compute_s: float) -> float:
        return compute_s + self.sync_s * self.syncs_per_step


OUTER_DTYPES = ("fp32", "int8")  # what the emulated DiLoCo sends its pseudo-gradient in (sites_train.py)


def sync_of(method: str, inner_steps: int, outer_dtype: str = "fp32") -> Sync:
    if outer_dtype not in OUTER_DTYPES:
        raise EmulationError(field_error("outer_dtype", outer_dtype, f"must be one of {', '.join(OUTER_DTYPES)}"))
    if method == "ddp":
        return Sync("ddp")
    return Sync("diloco", inner_steps, outer_dtype="int8" if outer_dtype == "int8" else "fp32")


def predict(method: str, params: int, inner_steps: int, ic: Interconnect, outer_dtype: str = "fp32") -> Predicted:
    """The sites model on the emulated long haul: two sites of one rank each, fp32 gradients, the pseudo-gradient
    in ``outer_dtype``."""
    t = sync_traffic(sync_of(method, inner_steps, outer_dtype), params * FP32_BYTES, params, 2, 2, 1, 1)
    rate = egress_rate_bytes_s(ic, t.connections)
    return Predicted(t.bytes_per_sync / rate + t.crossings * ic.rtt_s / 2.0, t.syncs_per_step, t.bytes_per_step)


@dataclass(frozen=True)
class SiteRun:
    """One measured run over the emulated long haul beside the model's prediction (per site's egress)."""

    method: str
    inner_steps: int
    outer_dtype: str
    params: int
    steps: int
    step_s: float                 # measured, mean of the timed steps
    compute_s: float              # their compute part
    predicted_step_s: float
    bytes_per_step: float         # measured payload leaving a site per step (mean of the two sites)
    predicted_bytes_per_step: float
    dci_bytes_s: float            # the long haul's payload rate in the model
    rtt_s: float

    @property
    def step_error(self) -> float:
        return self.step_s / self.predicted_step_s - 1.0

    @property
    def bytes_error(self) -> float:
        return self.bytes_per_step / self.predicted_bytes_per_step - 1.0

    def to_json(self) -> dict[str, object]:
        return {"method": self.method, "inner_steps": self.inner_steps, "outer_dtype": self.outer_dtype,
                "params": self.params, "steps": self.steps,
                "step_s": self.step_s, "compute_s": self.compute_s, "predicted_step_s": self.predicted_step_s,
                "step_error": self.step_error, "bytes_per_step": self.bytes_per_step,
                "predicted_bytes_per_step": self.predicted_bytes_per_step, "bytes_error": self.bytes_error,
                "dci_bytes_s": self.dci_bytes_s, "rtt_s": self.rtt_s}


def _payload_bytes(plan: Plan) -> list[float]:
    """Payload each site has sent over the long haul so far: frame bytes - headers (module docstring)."""
    out = []
    for ns in plan.switches:
        stats = "/sys/class/net/dci/statistics"
        tx = float(net.nsx(ns, "cat", f"{stats}/tx_bytes").stdout)
        frames = float(net.nsx(ns, "cat", f"{stats}/tx_packets").stdout)
        out.append(tx - TCP_HEADER_BYTES * frames)
    return out


def measure(plan: Plan, cluster: Cluster, method: str, params: int, steps: int, warmup: int, inner_steps: int = 1,
            timeout_s: float = 300, outer_dtype: str = "fp32") -> SiteRun:
    """Train the small model by ``method`` (ddp or diloco) across the emulated sites of ``plan`` and compare with the
    model (module docstring). For diloco, ``warmup`` and ``steps`` are whole multiples of ``inner_steps``."""
    if method not in ("ddp", "diloco"):
        raise EmulationError(field_error("method", method, "must be ddp or diloco"))
    h = inner_steps if method == "diloco" else 1
    sync_of(method, h, outer_dtype)  # refuses an outer type the emulated run does not send
    for name, v in (("warmup", warmup), ("steps", steps)):
        if v < 0 or v % h or (name == "steps" and v == 0):
            raise EmulationError(field_error(name, v, f"must be a positive multiple of inner_steps ({h})"))
    before = _payload_bytes(plan)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        cmd = [sys.executable, "-m", "slowlink.emulate.sites_train", method, str(params), str(steps), str(warmup),
               str(h), str(out), outer_dtype]
        codes = net.run(plan, cmd, timeout_s=timeout_s)
        if any(codes):
            raise EmulationError(f"the {method} run across the emulated sites failed (exit codes {codes})")
        data = json.loads(out.read_text())
    after = _payload_bytes(plan)
    sent = sum(a - b for a, b in zip(after, before, strict=True)) / len(after)
    ic = emulated_interconnect(cluster, plan)
    p = predict(method, int(data["params"]), h, ic, outer_dtype)
    compute = sum(data["compute_s"]) / steps
    dtype = outer_dtype if method == "diloco" else "fp32"
    return SiteRun(method, h, dtype, int(data["params"]), steps, sum(data["step_s"]) / steps, compute,
                   p.step_s(compute), sent / (warmup + steps), p.bytes_per_step, ic.egress_bytes_s, ic.rtt_s)


@dataclass(frozen=True)
class SitesValidation:
    """DDP and DiLoCo over the emulated long haul, with the round trip measured on it (TCP connect)."""

    runs: tuple[SiteRun, ...]
    rtt_s: float           # the interconnect's, as the relay was asked to make it
    measured_rtt_s: float  # smallest TCP connect round trip between the sites' nodes

    def to_json(self) -> dict[str, object]:
        return {"rtt_s": self.rtt_s, "measured_rtt_s": self.measured_rtt_s, "runs": [r.to_json() for r in self.runs]}


def validate_sites(cluster: Cluster, scale: float, params: int, steps: int, inner_steps: int,
                   timeout_s: float = 300) -> SitesValidation:
    """Bring the two sites of ``cluster`` up, run DDP (one warm-up step, ``steps`` timed) and DiLoCo with fp32 and
    with int8 pseudo-gradients (one warm-up sync period, ``steps`` rounded up to whole periods), measure the round
    trip, tear down."""
    from slowlink.emulate.measure import rtt_s

    if params < 2 or inner_steps < 1 or steps < 1:
        raise EmulationError(field_error("params/steps/inner_steps", (params, steps, inner_steps),
                                         "need params >= 2, steps >= 1, inner_steps >= 1"))
    plan = net.up_owned(site_plan(cluster, scale))
    try:
        rtt = rtt_s(plan, 0, 1)
        ddp = measure(plan, cluster, "ddp", params, steps, 1, timeout_s=timeout_s)
        periods = -(-steps // inner_steps)
        diloco = [measure(plan, cluster, "diloco", params, periods * inner_steps, inner_steps, inner_steps, timeout_s,
                          dtype) for dtype in OUTER_DTYPES]
    finally:
        net.down(plan.run_id)
    return SitesValidation((ddp, *diloco), 2.0 * plan.link("dci").delay_s, rtt)
