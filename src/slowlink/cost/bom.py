"""Bill of materials of the compute fabric: switches per tier, links per tier and their medium, optics, NICs.

Counted from :func:`slowlink.topology.shape.fabric_shape`, the one sizing rule the step model, the flow
simulator's graph (:mod:`slowlink.topology.fattree`, :mod:`slowlink.topology.dragonfly`) and the emulator
use, so the fabric that is priced is the fabric that is modelled (tests/cost check every count against the
built graph). The graph keeps *logical* switches (a fat tree's spine plane ``s`` is one vertex with one
port per leaf); here they are packed into physical ``switch_radix``-port boxes:

  * fat tree / rail-optimized: ``L = ceil(nodes / nodes_per_leaf)`` leaf blocks (x NICs per node for
    rails), ``U`` uplink cables per leaf; two tiers: ``L x U`` leaf-spine cables on ``ceil(L U / radix)``
    spines; three tiers: ``P = ceil(L / leaves_per_pod)`` pods, each with ``ceil(U (l_p + C) / radix)``
    aggregation switches for its ``l_p`` leaves, ``P x U x C`` aggregation-core cables on
    ``ceil(P U C / radix)`` cores (``C`` = cores behind each aggregation index);
  * dragonfly (Kim et al., ISCA 2008): ``groups x a`` switches, ``a (a - 1) / 2`` local links per group and
    ``m`` global links per pair of groups;
  * node-leaf cables: every compute NIC, plus ``fabric.management_ports`` (the UFM appliance) on free leaf
    ports: NVIDIA's DGX SuperPOD H100 RA keeps a node slot of each fabric for it (31 DGX + UFM per SU);
  * storage (:mod:`slowlink.topology.storage`): converged targets sit on storage leaves of their own after the
    compute leaves (``storage_leaf`` links, uplinks like any leaf); a separate storage fabric is the graph's
    one non-blocking switch, ``ceil(ports / radix)`` boxes, with a ``node_storage`` cable per storage NIC and
    a ``storage_target`` cable per target (the storage servers themselves are not priced).

A logical switch wider than the radix (a 2-tier tree of more than ``radix`` leaves, an aggregation plane
of more than ``radix`` ports) cannot be one box: the count is then a lower bound and :attr:`Bom.notes` says
why (a chassis or another tier in practice); ``slowlink search`` rejects such designs (rule ``fabric_fits``).

Media by reach (NVIDIA's 400G/100G-PAM4 cabling guide: copper DAC <= 3 m, multimode SR4 <= 50 m,
single-mode DR4 <= 500 m): node-leaf is copper when a fat-tree leaf serves no more nodes than a rack holds
(top of rack), multimode to rail leaves at the end of a row; leaf-spine multimode (within a row of
scalable units); spine-core and dragonfly global links single-mode (across the hall); dragonfly node and
local links copper (a group is a cabinet). Each optical link has one transceiver per end.
Not counted: the out-of-band and front-end networks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from slowlink import units
from slowlink.errors import FabricMisfit
from slowlink.spec.cluster import Cluster
from slowlink.topology.shape import FabricShape, fabric_shape
from slowlink.topology.storage import converged_endpoints

OPTICS = {"mmf": "SR", "smf": "DR"}  # transceiver family of an optical medium (IEEE 802.3 names)
STORAGE_TIERS = ("node_storage", "storage_target")  # links of a separate storage fabric, at its NIC speed
Counts = tuple[dict[str, int], dict[str, int], dict[str, str], list[str]]


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Bom:
    """Counts of one cluster's compute fabric; tiers by name (``leaf``, ``spine``, ``core``, ``group``)."""

    topology: str
    switch_radix: int
    speed_gbit_s: float
    switches: dict[str, int]
    links: dict[str, int]
    media: dict[str, str]           # link tier -> dac | mmf | smf
    nics: dict[str, int]            # compute, storage
    notes: tuple[str, ...] = field(default=())
    storage_speed_gbit_s: float = 0.0  # a separate storage fabric's line rate

    def tier_speed_gbit_s(self, tier: str) -> float:
        """Line rate of a link tier (a separate storage fabric runs at its own NICs' rate; a site's tiers are
        ``<site> <tier>``)."""
        return self.storage_speed_gbit_s if tier.split()[-1] in STORAGE_TIERS else self.speed_gbit_s

    @property
    def fabric_switches(self) -> int:
        """Switches of the compute fabric (all but a separate storage fabric's)."""
        return sum(n for tier, n in self.switches.items() if tier.split()[-1] != "storage")

    @property
    def switch_count(self) -> int:
        return sum(self.switches.values())

    @property
    def cables(self) -> dict[str, int]:
        """Cables (copper) or fiber links (optics) by medium."""
        out: dict[str, int] = {}
        for tier, n in self.links.items():
            out[self.media[tier]] = out.get(self.media[tier], 0) + n
        return out

    @property
    def transceivers(self) -> dict[str, int]:
        """Transceivers by type (``400G-SR4``...): two per optical link, one at each end."""
        out: dict[str, int] = {}
        for tier, n in self.links.items():
            medium, speed = self.media[tier], self.tier_speed_gbit_s(tier)
            if medium in OPTICS:
                key = f"{speed:g}G-{OPTICS[medium]}{8 if speed > 400 else 4}"
                out[key] = out.get(key, 0) + 2 * n
        return out

    def to_json(self) -> dict[str, object]:
        return {"topology": self.topology, "switch_radix": self.switch_radix, "speed_gbit_s": self.speed_gbit_s,
                "switches": self.switches, "links": self.links, "media": self.media,
                "transceivers": self.transceivers, "cables": self.cables, "nics": self.nics,
                "notes": list(self.notes)}


def site_boms(boms: list[tuple[str, Bom]]) -> Bom:
    """One bill of several sites' own fabrics: each tier named ``<site> <tier>``, NICs summed, the first site's
    radix and line rate in the title (every site's NICs run at the cluster's rate)."""
    first = boms[0][1]
    nics: dict[str, int] = {}
    for _, b in boms:
        for role, n in b.nics.items():
            nics[role] = nics.get(role, 0) + n
    return Bom(", ".join(f"{name}: {b.topology}" for name, b in boms), first.switch_radix, first.speed_gbit_s,
               {f"{name} {t}": n for name, b in boms for t, n in b.switches.items()},
               {f"{name} {t}": n for name, b in boms for t, n in b.links.items()},
               {f"{name} {t}": m for name, b in boms for t, m in b.media.items()}, nics,
               tuple(f"{name}: {note}" for name, b in boms for note in b.notes),
               max(b.storage_speed_gbit_s for _, b in boms))


def _node_leaf_medium(cluster: Cluster, shape: FabricShape, nodes_per_rack: int) -> str:
    top_of_rack = cluster.fabric.topology == "fat-tree" and shape.nodes_per_leaf <= nodes_per_rack
    return "dac" if top_of_rack else "mmf"


def _management(cluster: Cluster, free_ports: int) -> int:
    ports = cluster.fabric.management_ports
    if ports > free_ports:
        raise FabricMisfit(f"fabric.management_ports ({ports}) must fit the {free_ports} free leaf ports: the "
                        "nodes fill the leaves (leave a node slot free, as the DGX SuperPOD does for its UFM)")
    return ports


def _one_switch(cluster: Cluster, endpoints: int, targets: int) -> Counts:
    radix = cluster.fabric.switch_radix
    ports = endpoints + targets
    notes = [] if ports <= radix else [f"one switch for {ports} ports exceeds switch_radix ({radix}): priced as "
                                       "several boxes (a director chassis in practice)"]
    extra = _management(cluster, max(0, radix - ports))
    links = {"node_leaf": endpoints + extra} | ({"storage_leaf": targets} if targets else {})
    return {"leaf": _ceil(ports + extra, radix)}, links, {"node_leaf": "dac", "storage_leaf": "dac"}, notes


def _clos(cluster: Cluster, shape: FabricShape, nodes_per_rack: int) -> Counts:
    """Switches, links, media and notes of a 1-3 tier fat tree or rail-optimized fabric."""
    f, nics, radix = cluster.fabric, shape.nics_per_node, cluster.fabric.switch_radix
    endpoints, targets = cluster.nodes * nics, len(converged_endpoints(cluster))
    if f.topology == "single-switch" or f.tiers == 1:
        return _one_switch(cluster, endpoints, targets)
    rails = f.topology == "rail-optimized"
    compute_leaves = _ceil(cluster.nodes, shape.nodes_per_leaf) * (nics if rails else 1)
    extra = _management(cluster, compute_leaves * shape.endpoints_per_leaf - endpoints)
    leaves = compute_leaves + _ceil(targets, shape.endpoints_per_leaf)
    switches, links = {"leaf": leaves}, {"node_leaf": endpoints + extra}
    media = {"node_leaf": _node_leaf_medium(cluster, shape, nodes_per_rack), "storage_leaf": "mmf"}
    if targets:
        links["storage_leaf"] = targets
    if leaves == 1:
        return switches, links, media, []
    up, notes = shape.uplinks_per_leaf, []
    links["leaf_spine"], media["leaf_spine"] = leaves * up, "mmf"
    if f.tiers < 3 or leaves <= shape.leaves_per_pod:
        switches["spine"] = _ceil(leaves * up, radix)
        if leaves > radix:
            notes.append(f"{leaves} leaves exceed switch_radix ({radix}): a 2-tier Clos of {radix}-port switches "
                         "reaches at most that many leaves (use tiers: 3)")
        return switches, links, media, notes
    per_pod, cores = shape.leaves_per_pod, shape.cores_per_group
    pods = _ceil(leaves, per_pod)
    pod_leaves = [min(per_pod, leaves - p * per_pod) for p in range(pods)]
    switches["spine"] = sum(_ceil(up * (lp + cores), radix) for lp in pod_leaves)
    links["spine_core"], media["spine_core"] = pods * up * cores, "smf"
    switches["core"] = _ceil(pods * up * cores, radix)
    if per_pod + cores > radix:
        notes.append(f"an aggregation plane needs {per_pod} + {cores} ports, more than switch_radix ({radix}): "
                     "priced as several boxes (a chassis in practice)")
    if pods > radix:
        notes.append(f"{pods} pods exceed switch_radix ({radix}): a core plane cannot reach them all")
    return switches, links, media, notes


def _dragonfly(cluster: Cluster, shape: FabricShape) -> Counts:
    g, a, m = shape.groups, shape.switches_per_group, shape.global_links_per_pair
    endpoints = cluster.nodes * shape.nics_per_node
    extra = _management(cluster, g * a * shape.endpoints_per_leaf - endpoints)
    ports = shape.endpoints_per_leaf + (a - 1) + _ceil(m * (g - 1), a)
    notes = [] if ports <= cluster.fabric.switch_radix else [
        f"a group switch needs {ports} ports, more than switch_radix ({cluster.fabric.switch_radix})"]
    links = {"node_switch": endpoints + extra, "local": g * a * (a - 1) // 2, "global": g * (g - 1) // 2 * m}
    return {"group": g * a}, links, {"node_switch": "dac", "local": "dac", "global": "smf"}, notes


def _storage_fabric(cluster: Cluster) -> Counts:
    """A separate storage fabric as the graph builds it: one non-blocking switch (``storsw``)."""
    st, snics = cluster.storage, cluster.storage_nics
    if st is None or st.shared_with_compute or snics is None or snics.per_node == 0:
        return {}, {}, {}, []
    cables = cluster.nodes * snics.per_node
    radix = cluster.fabric.switch_radix
    links = {"node_storage": cables, "storage_target": st.targets}
    notes = [] if cables + st.targets <= radix else [
        f"the storage switch needs {cables + st.targets} ports, more than switch_radix ({radix}): priced as "
        "several boxes (a director chassis or a storage leaf-spine in practice)"]
    return {"storage": _ceil(cables + st.targets, radix)}, links, dict.fromkeys(links, "mmf"), notes


def bill_of_materials(cluster: Cluster, nodes_per_rack: int = 4) -> Bom:
    """The compute fabric's switches, links, media and NICs (module docstring for the rule).

    ``nodes_per_rack`` (the price book's server entry) decides whether a fat-tree leaf is top-of-rack.
    """
    shape = fabric_shape(cluster)
    if cluster.compute_nics.per_node == 0:
        switches: dict[str, int] = {}
        links: dict[str, int] = {}
        media: dict[str, str] = {}
        notes: list[str] = []
    elif cluster.fabric.topology == "dragonfly":
        switches, links, media, notes = _dragonfly(cluster, shape)
    else:
        switches, links, media, notes = _clos(cluster, shape, nodes_per_rack)
    s_switches, s_links, s_media, s_notes = _storage_fabric(cluster)
    nics = {"compute": cluster.nodes * cluster.compute_nics.per_node}
    storage_speed = 0.0
    if cluster.storage_nics is not None:
        nics["storage"] = cluster.nodes * cluster.storage_nics.per_node
        storage_speed = cluster.storage_nics.speed_bytes_s / units.Gbit
    media = {tier: m for tier, m in (media | s_media).items() if tier in links or tier in s_links}
    return Bom(cluster.fabric.topology, cluster.fabric.switch_radix,
               cluster.compute_nics.speed_bytes_s / units.Gbit, switches | s_switches, links | s_links, media,
               nics, tuple(notes + s_notes), storage_speed)
