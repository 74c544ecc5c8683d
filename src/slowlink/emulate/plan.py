"""The emulated cluster as a plan: namespaces, bridges and shaped links, derived from a cluster spec.

Pure: no system calls, so the shape can be tested without root. A node is a namespace with one
``eth0``; a switch is a namespace holding a bridge ``br0``. A 2-tier fat tree puts ``nodes_per_leaf``
nodes under each leaf and one uplink per leaf to a single spine, shaped to
``nodes_per_leaf * node_rate / oversubscription[0]`` so the leaf uplink is really oversubscribed.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from slowlink import units
from slowlink.errors import EmulationError, field_error
from slowlink.spec.cluster import Cluster

PREFIX = "sl-"
SUBNET = "10.213.{net}.{host}"
DEFAULT_SCALE = 100 * units.Mbit / (25 * units.Gbit)  # 25 Gbit/s NIC -> 100 Mbit/s


@dataclass(frozen=True)
class Link:
    """A veth pair between namespace ``a`` (device ``dev_a``) and ``b`` (``dev_b``), shaped both ways."""

    name: str
    a: str
    dev_a: str
    b: str
    dev_b: str
    rate_bytes_s: float


@dataclass(frozen=True)
class Plan:
    run_id: str
    nodes: tuple[str, ...]
    switches: tuple[str, ...]
    links: tuple[Link, ...]
    addresses: tuple[str, ...]
    node_rate_bytes_s: float
    scale: float
    topology: str

    @property
    def namespaces(self) -> tuple[str, ...]:
        return self.nodes + self.switches

    def ns(self, short: str) -> str:
        return f"{PREFIX}{self.run_id}-{short}"

    def link(self, name: str) -> Link:
        for link in self.links:
            if link.name == name:
                return link
        names = [x.name for x in self.links]
        raise EmulationError(field_error("link", name, f"is not a link; links: {names}"))


def new_run_id() -> str:
    return secrets.token_hex(2)


def build_plan(cluster: Cluster, scale: float = DEFAULT_SCALE, nodes: int | None = None,
               run_id: str | None = None) -> Plan:
    """Namespaces and links of the scaled copy; rate of a node link = NICs x speed x ``scale``."""
    n = cluster.nodes if nodes is None else nodes
    if n < 1 or n > 64:
        raise EmulationError(field_error("nodes", n, "must be between 1 and 64 for an emulation"))
    if not 0 < scale <= 1:
        raise EmulationError(field_error("scale", scale, "must be in (0, 1]"))
    rid = run_id or new_run_id()
    rate = cluster.compute_nics.node_bytes_s * scale
    if rate < 1 * units.Mbit or rate > 10 * units.Gbit:
        raise EmulationError(field_error("scale", scale, f"gives {rate / units.Mbit:g} Mbit/s per node; "
                                         "choose one giving 1 Mbit/s to 10 Gbit/s"))
    def ns(s: str) -> str:
        return f"{PREFIX}{rid}-{s}"
    node_ns = tuple(ns(f"n{k}") for k in range(n))
    topo = cluster.fabric.topology
    links: list[Link] = []
    if topo == "single-switch" or cluster.fabric.tiers == 1 or n <= _per_leaf(cluster, n):
        switches: tuple[str, ...] = (ns("sw0"),)
        for k in range(n):
            links.append(Link(f"n{k}", node_ns[k], "eth0", switches[0], f"p{k}", rate))
        topo = "single-switch"
    else:
        per_leaf = _per_leaf(cluster, n)
        leaves = -(-n // per_leaf)
        switches = (*(ns(f"leaf{j}") for j in range(leaves)), ns("spine"))
        for k in range(n):
            links.append(Link(f"n{k}", node_ns[k], "eth0", switches[k // per_leaf], f"p{k}", rate))
        up = per_leaf * rate / cluster.fabric.oversubscription[0]
        for j in range(leaves):
            links.append(Link(f"up{j}", switches[j], "uplink", switches[-1], f"d{j}", up))
        topo = "fat-tree"
    addrs = tuple(SUBNET.format(net=0, host=k + 1) for k in range(n))
    return Plan(rid, node_ns, switches, tuple(links), addrs, rate, scale, topo)


def _per_leaf(cluster: Cluster, n: int) -> int:
    """Nodes under one leaf: half the switch radix split evenly, but at least two leaves when n >= 4."""
    radix_nodes = max(1, cluster.fabric.switch_radix // 2 // max(1, cluster.compute_nics.per_node))
    return min(radix_nodes, max(1, n // 2)) if n >= 4 else n


def plan_summary(plan: Plan) -> str:
    """A few lines for the terminal: run id, topology, nodes with addresses, links with rates."""
    lines = [f"emulation {plan.run_id}: {plan.topology}, {len(plan.nodes)} nodes, scale {plan.scale:g}"]
    lines += [f"  node {k}: {ns} {addr}" for k, (ns, addr) in enumerate(zip(plan.nodes, plan.addresses,
                                                                             strict=True))]
    lines += [f"  link {x.name}: {x.a} <-> {x.b} {x.rate_bytes_s / units.Mbit:g} Mbit/s" for x in plan.links]
    return "\n".join(lines)
