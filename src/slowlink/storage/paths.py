"""The paths storage traffic takes: each client node's NICs and limits, and the storage's own rates.

A node reaches storage over its storage NICs on a separate fabric, or over its compute NICs when
``storage.shared_with_compute`` (or when it has no storage NICs). A NIC delivers its line rate x the
catalog transport's efficiency (the same rule as the flow simulator's storage links,
slowlink.topology.storage). A client is further capped by ``storage.per_client_*_gbyte_s`` when given
(e.g. a single Lustre or NFS mount's limit), and the storage by its aggregate rate and by the tier's media.
"""

from __future__ import annotations

from typing import Literal

from slowlink.errors import SpecError
from slowlink.spec.cluster import Cluster, Storage
from slowlink.spec.storage import StorageDetails, plain_details

Direction = Literal["read", "write"]


def storage_of(cluster: Cluster, what: str) -> Storage:
    """The cluster's storage section; a :class:`SpecError` naming ``what`` needs it when there is none."""
    if cluster.storage is None:
        raise SpecError(f"storage (None): cluster {cluster.name} has no storage section, which {what} needs")
    return cluster.storage


def details_of(storage: Storage) -> StorageDetails:
    """Tiers, per-client limits and retention (a Storage built by hand without them gets the defaults)."""
    if storage.details is not None:
        return storage.details
    return plain_details(storage.read_bytes_s, storage.write_bytes_s)


def converged(cluster: Cluster) -> bool:
    """Storage traffic rides the compute NICs: declared so, or the nodes have no storage NICs."""
    st = cluster.storage
    nics = cluster.storage_nics
    return bool(st is not None and st.shared_with_compute) or nics is None or nics.per_node == 0


def client_nic_bytes_s(cluster: Cluster) -> float:
    """What one node's NICs toward storage deliver, bytes/s: NICs x line rate x transport efficiency."""
    group = cluster.compute_nics if converged(cluster) or cluster.storage_nics is None else cluster.storage_nics
    return group.node_bytes_s * cluster.fabric.transport.efficiency


def client_bytes_s(cluster: Cluster, direction: Direction) -> float:
    """One client node's storage rate: min(its NICs, the per-client limit of ``direction``), bytes/s."""
    nic = client_nic_bytes_s(cluster)
    d = details_of(storage_of(cluster, "a client rate"))
    limit = d.per_client_read_bytes_s if direction == "read" else d.per_client_write_bytes_s
    return nic if limit is None else min(nic, limit)


def storage_bytes_s(cluster: Cluster, direction: Direction, tier: str | None = None) -> float:
    """The storage's aggregate rate toward ``tier`` (default: the first): min(aggregate, tier media), bytes/s."""
    st = storage_of(cluster, "a storage rate")
    d = details_of(st)
    t = d.tier(tier) if tier is not None else d.tiers[0]
    if direction == "read":
        return min(st.read_bytes_s, t.read_bytes_s)
    return min(st.write_bytes_s, t.write_bytes_s)
