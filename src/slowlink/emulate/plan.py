"""The emulated cluster as a plan: namespaces, bridges and shaped links, derived from a cluster spec.

Pure: no system calls, so the shape can be tested without root. A node is a namespace with one
``eth<r>`` per compute NIC (rail ``r``, subnet ``10.213.<r>.0/24``); a switch is a namespace holding one
bridge ``br<r>`` per rail, so rails are separate L2 fabrics as in a rail-optimized cluster. A 2-tier fat
tree puts ``nodes_per_leaf`` nodes under each leaf (the one sizing rule of
:func:`slowlink.topology.shape.fabric_shape`, which the models use too: set ``fabric.switch_radix`` to
size a small cluster's leaves) and, per rail, one uplink per leaf to a single spine, shaped by the same
rule (:func:`~slowlink.topology.shape.uplink_bytes_s`: ``nodes_per_leaf * nic_rate / oversubscription[0]``) so
the leaf uplink is really oversubscribed.
A link may carry an added one-way delay and a loss fraction, made by netem where the kernel has it and
by a relay namespace in the middle of the link otherwise (see ``relay.py``). The cluster file's degraded
NICs and delayed nodes (``degraded:``, docs/straggler.md) are built in: a NIC's link shaped to its rate,
a node's links delayed.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, replace

from slowlink import units
from slowlink.errors import EmulationError, field_error
from slowlink.spec.cluster import Cluster
from slowlink.topology.shape import fabric_shape, uplink_bytes_s

PREFIX = "sl-"
SUBNET = "10.213.{net}.{host}"
DEFAULT_SCALE = 100 * units.Mbit / (25 * units.Gbit)  # 25 Gbit/s NIC -> 100 Mbit/s
MAX_RAILS = 8


@dataclass(frozen=True)
class Link:
    """A veth pair between namespace ``a`` (device ``dev_a``) and ``b`` (``dev_b``), shaped both ways."""

    name: str
    a: str
    dev_a: str
    b: str
    dev_b: str
    rate_bytes_s: float
    rail: int = 0
    delay_s: float = 0.0
    """Added one-way delay, each direction."""
    loss: float = 0.0
    """Fraction of frames dropped, each direction."""

    @property
    def impaired(self) -> bool:
        return self.delay_s > 0 or self.loss > 0


@dataclass(frozen=True)
class Plan:
    run_id: str
    nodes: tuple[str, ...]
    switches: tuple[str, ...]
    links: tuple[Link, ...]
    addresses: tuple[str, ...]
    """Rail-0 address of each node (the rendezvous address)."""
    node_rate_bytes_s: float
    """Rate of one NIC link (one rail), bytes/s."""
    scale: float
    topology: str
    rails: int = 1
    nodes_per_leaf: int = 0
    """Nodes under one leaf of a fat tree; 0 for a single switch."""
    seed: int = 0
    """Seed of the relays' loss draws."""
    owner_pid: int = 0
    """The process whose run this is (a drill, a probe): when it is gone, the run is stale and the next start
    or ``emulate down`` removes it; 0 for an emulation kept up until ``emulate down``."""

    @property
    def namespaces(self) -> tuple[str, ...]:
        return self.nodes + self.switches

    def ns(self, short: str) -> str:
        return f"{PREFIX}{self.run_id}-{short}"

    def address(self, node: int, rail: int = 0) -> str:
        return SUBNET.format(net=rail, host=node + 1)

    def link(self, name: str) -> Link:
        for link in self.links:
            if link.name == name:
                return link
        names = [x.name for x in self.links]
        raise EmulationError(field_error("link", name, f"is not a link; links: {names}"))

    def relay_ns(self, link: Link) -> str:
        """The namespace in the middle of an impaired link (``sl-<run>-r-<link>``)."""
        return self.ns(f"r-{link.name}")


def new_run_id() -> str:
    return secrets.token_hex(2)


def build_plan(cluster: Cluster, scale: float = DEFAULT_SCALE, nodes: int | None = None,
               run_id: str | None = None, delay_s: dict[str, float] | None = None,
               loss: dict[str, float] | None = None, seed: int = 0) -> Plan:
    """Namespaces and links of the scaled copy; rate of a NIC link = NIC speed x ``scale``.

    ``delay_s`` and ``loss`` map link names (``n0``, ``n0r1``, ``up0``, ...) to an added one-way delay
    and a drop fraction.
    """
    n = cluster.nodes if nodes is None else nodes
    if n < 1 or n > 64:
        raise EmulationError(field_error("nodes", n, "must be between 1 and 64 for an emulation"))
    if not 0 < scale <= 1:
        raise EmulationError(field_error("scale", scale, "must be in (0, 1]"))
    rails = max(1, cluster.compute_nics.per_node)
    if rails > MAX_RAILS:
        raise EmulationError(field_error("nics.compute.per_node", rails, f"must be <= {MAX_RAILS} to emulate"))
    rid = run_id or new_run_id()
    rate = cluster.compute_nics.speed_bytes_s * scale
    if rate < 1 * units.Mbit or rate > 10 * units.Gbit:
        raise EmulationError(field_error("scale", scale, f"gives {rate / units.Mbit:g} Mbit/s per NIC; "
                                         "choose one giving 1 Mbit/s to 10 Gbit/s"))

    def ns(s: str) -> str:
        return f"{PREFIX}{rid}-{s}"

    def rname(base: str, r: int) -> str:
        return base if rails == 1 else f"{base}r{r}"

    node_ns = tuple(ns(f"n{k}") for k in range(n))
    per_leaf = fabric_shape(cluster).nodes_per_leaf
    links: list[Link] = []
    if cluster.fabric.topology == "single-switch" or cluster.fabric.tiers == 1 or n <= per_leaf:
        switches: tuple[str, ...] = (ns("sw0"),)
        for k in range(n):
            links += [Link(rname(f"n{k}", r), node_ns[k], f"eth{r}", switches[0], f"p{k}r{r}", rate, r)
                      for r in range(rails)]
        topo, per_leaf = "single-switch", 0
    else:
        leaves = -(-n // per_leaf)
        switches = (*(ns(f"leaf{j}") for j in range(leaves)), ns("spine"))
        for k in range(n):
            links += [Link(rname(f"n{k}", r), node_ns[k], f"eth{r}", switches[k // per_leaf], f"p{k}r{r}",
                           rate, r) for r in range(rails)]
        up = uplink_bytes_s(per_leaf, rate, cluster.fabric.oversubscription[0])  # one rail's leaf uplink
        for j in range(leaves):
            links += [Link(rname(f"up{j}", r), switches[j], f"up{r}", switches[-1], f"d{j}r{r}", up, r)
                      for r in range(rails)]
        topo = "fat-tree"
    links = _impair(_degrade(links, cluster, rails), _with_node_delays(delay_s or {}, cluster, n, rails), loss or {})
    addrs = tuple(SUBNET.format(net=0, host=k + 1) for k in range(n))
    return Plan(rid, node_ns, switches, tuple(links), addrs, rate, scale, topo, rails, per_leaf, seed)


def _degrade(links: list[Link], cluster: Cluster, rails: int) -> list[Link]:
    """The cluster file's degraded NICs (``degraded: [{node, nic, rate}]``) as links shaped to that rate."""
    rate = {(f"n{k}" if rails == 1 else f"n{k}r{r}"): f for (k, r), f in cluster.degraded.nic_rate.items()}
    return [replace(x, rate_bytes_s=x.rate_bytes_s * rate.get(x.name, 1.0)) for x in links]


def _with_node_delays(delay_s: dict[str, float], cluster: Cluster, n: int, rails: int) -> dict[str, float]:
    """``delay_s`` plus the cluster file's delayed nodes (``degraded: [{node, delay_ms}]``) on each of their
    links; a delay given by name wins."""
    out = {(f"n{k}" if rails == 1 else f"n{k}r{r}"): d for k, d in cluster.degraded.node_delay_s.items()
           if k < n for r in range(rails)}
    return out | delay_s


def _impair(links: list[Link], delay_s: dict[str, float], loss: dict[str, float]) -> list[Link]:
    names = {x.name for x in links}
    for what, table, hi in (("delay", delay_s, 10.0), ("loss", loss, 1.0)):
        for name, value in table.items():
            if name not in names:
                raise EmulationError(field_error(what, name, f"is not a link; links: {sorted(names)}"))
            if not 0 <= value < hi:
                raise EmulationError(field_error(f"{what} of {name}", value, f"must be in [0, {hi:g})"))
    return [Link(x.name, x.a, x.dev_a, x.b, x.dev_b, x.rate_bytes_s, x.rail, delay_s.get(x.name, 0.0),
                 loss.get(x.name, 0.0)) for x in links]

