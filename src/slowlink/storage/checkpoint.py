"""Checkpoints: size from the model, write time, the async blocking part and drain, and the restore storm.

Size: ``params x bytes per parameter``, where the weights take the training precision's bytes (or the saved
dtype's) and the optimizer the Adam state of :func:`slowlink.workload.memory.optimizer_state_bytes` (fp32
master + m + v under mixed precision; gradients are not saved). Mixed-precision Adam saves 2 + 12 = 14 bytes
per parameter (Megatron-LM, ZeRO: Rajbhandari et al. 2020, Sec. 3.1).

Who writes: sharded, every rank writes what it alone holds: weights split over tp x pp (and dp x cp under
ZeRO-3; else only the first data-parallel replica writes them, Megatron-LM's ``data_parallel_rank == 0``),
optimizer state split over tp x pp (and dp x cp under ZeRO >= 1). Gathered: rank 0 writes everything.
Ranks sit on nodes in blocks of gpus_per_node (the block placement).

  write      t = max(max_node_bytes / client_write, total / storage_write)
  restore    t = max(max_node_read / client_read, total_read / storage_read)   every rank reads its part at
             once; replicas read the same bytes (the restore storm)
  async      blocking = max_rank_bytes / host link (device to host over PCIe, line rate: a lower bound);
             drain = write time from host memory; host memory = the node's bytes; the drain must end before
             the next checkpoint, else the next one waits
  overhead per step = (sync: write | async: blocking + max(0, drain - interval)) / steps per interval

Host CPU on the write and restore paths (``serialize_time_s``, ``unpack_time_s``; priced by ``slowlink bench
checkpoint``, where a rate is measured, not by the cluster model, which has no per-CPU rate to cite):
torch.distributed.checkpoint's FileSystemWriter writes each tensor with ``torch.save`` from one thread per
rank (``thread_count=1`` by default, ``filesystem.py:_write_item``), and ``torch.save`` computes a CRC-32 of
every record it writes (``torch.utils.serialization.config.save.compute_crc32``, default on). The thread does
it before it writes, so per rank ``t = serialize + write``; ranks share the host's cores. On restore the reader
loads each item with ``torch.load`` and copies it into the caller's tensor (``FileSystemReader.read_data``:
``target_tensor.copy_(tensor)``): one host-memory copy after the read.

Sealed checkpoints (a manifest of SHA-256 digests written before the checkpoint is committed, and verified
before it is loaded: :mod:`slowlink.bench.manifest`): each rank digests the bytes it wrote, one core each,
``digest = max_rank_bytes / sha256`` (:func:`digest_time_s`). Sync: the step waits for the commit, so the digest
is on the critical path (``blocking = write + digest``). Async: the digest runs after the drain's write in the
background, so it delays the commit, not the step (``drain = write + digest``). Restore verifies before it
loads (``restore + digest``). :func:`sealed_times` applies it per mode.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from slowlink import units
from slowlink.errors import SpecError
from slowlink.spec.cluster import Cluster
from slowlink.spec.storage import Checkpoint
from slowlink.spec.workload import Workload
from slowlink.storage.paths import client_bytes_s, details_of, storage_bytes_s, storage_of
from slowlink.workload.flops import params
from slowlink.workload.memory import kept_bytes, optimizer_state_bytes
from slowlink.workload.placement import rank_grid


def bytes_per_param_parts(precision: str, weights_dtype: str = "training", save_optimizer: bool = True
                          ) -> dict[str, float]:
    """Bytes per parameter of each part saved: weights (training precision or ``weights_dtype``), optimizer."""
    weights = kept_bytes(precision) if weights_dtype == "training" else units.PRECISION_BYTES[weights_dtype]
    return {"weights": weights, "optimizer": optimizer_state_bytes(precision) if save_optimizer else 0.0}


@dataclass(frozen=True)
class CheckpointSize:
    params: float
    parts: dict[str, float]  # bytes of each part

    @property
    def total_bytes(self) -> float:
        return sum(self.parts.values())

    @property
    def bytes_per_param(self) -> float:
        return self.total_bytes / self.params

    def to_json(self) -> dict[str, object]:
        return {"checkpoint_bytes": self.total_bytes, "bytes_per_param": self.bytes_per_param,
                "params": self.params, "parts": self.parts}


def checkpoint_size(w: Workload) -> CheckpointSize:
    """Bytes of one checkpoint of ``w``: every parameter (dense and experts) x the bytes of each part."""
    c = w.checkpoint
    per = bytes_per_param_parts(w.training.precision, c.weights_dtype if c else "training",
                                c.save_optimizer if c else True)
    n = sum(params(w.model))
    return CheckpointSize(n, {k: v * n for k, v in per.items()})


def transfer_time_s(node_bytes: float, client_bytes_s: float, total_bytes: float, storage_bytes_s: float) -> float:
    """``max(node_bytes / client, total / storage)``: the busiest client or the storage, whichever binds."""
    return max(node_bytes / client_bytes_s, total_bytes / storage_bytes_s)


def checkpoint_write_time_s(total_bytes: float, writer_nodes: int, client_write_bytes_s: float,
                            storage_write_bytes_s: float) -> float:
    """Write time of ``total_bytes`` spread evenly over ``writer_nodes``: ``B / min(storage, n x client)``."""
    return transfer_time_s(total_bytes / writer_nodes, client_write_bytes_s, total_bytes, storage_write_bytes_s)


def checkpoint_restore_time_s(total_read_bytes: float, reader_nodes: int, client_read_bytes_s: float,
                              storage_read_bytes_s: float) -> float:
    """Restore time when ``reader_nodes`` read ``total_read_bytes`` at once: ``B / min(storage, n x client)``."""
    return transfer_time_s(total_read_bytes / reader_nodes, client_read_bytes_s, total_read_bytes,
                           storage_read_bytes_s)


def cpu_time_s(total_bytes: float, ranks: int, cores: int, bytes_s_per_core: float) -> float:
    """Seconds of a per-byte CPU pass (one thread per rank) over ``total_bytes`` when ``ranks`` share ``cores``:
    ``B / (rate x min(ranks, cores))``."""
    if ranks < 1 or cores < 1 or bytes_s_per_core <= 0:
        raise ValueError(f"ranks ({ranks}), cores ({cores}) and rate ({bytes_s_per_core}) must be positive")
    return total_bytes / (bytes_s_per_core * min(ranks, cores))


def dcp_write_time_s(total_bytes: float, ranks: int, cores: int, serialize_bytes_s: float,
                     storage_time_s: float) -> float:
    """A torch.distributed.checkpoint save: every rank's ``torch.save`` pass (CRC-32) and then its bytes to
    storage, one after the other on the rank's writer thread (module docstring): ``serialize + storage``."""
    return cpu_time_s(total_bytes, ranks, cores, serialize_bytes_s) + storage_time_s


def dcp_restore_time_s(total_bytes: float, ranks: int, cores: int, copy_bytes_s: float,
                       storage_time_s: float) -> float:
    """A torch.distributed.checkpoint load: the read, then one host copy into the caller's tensors."""
    return storage_time_s + cpu_time_s(total_bytes, ranks, cores, copy_bytes_s)


# SHA-256 on one core, hashlib with the CPU's SHA extensions, 4 MiB chunks from memory: 1.78 GB/s (median of 5,
# 1.76-1.79) on this project's 2-core AMD EPYC VM, measured by benchmarks/digest_rate.py (1.52 GB/s from a file
# in the page cache). Without SHA extensions OpenSSL's SHA-256 runs at ~0.4-0.5 GB/s per core.
SHA256_BYTES_S_PER_CORE = 1.78e9


def digest_time_s(bytes_per_rank: float, digest_bytes_s: float = SHA256_BYTES_S_PER_CORE) -> float:
    """Seconds for a rank to digest the bytes it wrote, one core per rank: ``b / sha256``."""
    return bytes_per_rank / digest_bytes_s


def sealed_times(mode: str, write_s: float, blocking_s: float, drain_s: float, restore_s: float, digest_s: float
                 ) -> tuple[float, float, float]:
    """(blocking, drain, restore) of a sealed checkpoint (module docstring): the digest on the step's critical
    path in sync mode, in the background drain in async mode, and before every restore."""
    if mode == "sync":
        return write_s + digest_s, drain_s, restore_s + digest_s
    return blocking_s, drain_s + digest_s, restore_s + digest_s


def staging_time_s(bytes_per_gpu: float, host_link_bytes_s: float) -> float:
    """The blocking part of an async checkpoint: one GPU's bytes copied device to host, ``b / host link``."""
    return bytes_per_gpu / host_link_bytes_s


def rank_bytes(w: Workload, size: CheckpointSize, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """(bytes each rank writes, bytes each rank reads back) under ``layout`` (module docstring)."""
    p = w.parallel
    grid, axes = rank_grid(p)
    n = grid.size
    first = np.zeros(n, dtype=bool)  # the first data-parallel (and context-parallel) replica
    first[grid[tuple(0 if a in ("dp", "cp") else slice(None) for a in axes)].ravel()] = True
    mp, shard = p.tp * p.pp, p.dp_shards
    wt, opt = size.parts["weights"], size.parts["optimizer"]
    w_own = wt / (mp * shard) if p.zero >= 3 else wt / mp
    o_own = opt / (mp * shard) if p.zero >= 1 else opt / mp
    read = np.full(n, w_own + o_own)
    if layout == "gathered":
        write = np.zeros(n)
        write[0] = size.total_bytes
        read = np.zeros(n)
        read[0] = size.total_bytes  # rank 0 loads and broadcasts (the broadcast is not priced)
        return write, read
    write = np.where(first | (p.zero >= 3), w_own, 0.0) + np.where(first | (p.zero >= 1), o_own, 0.0)
    return write, read


def per_node(values: np.ndarray, gpus_per_node: int) -> np.ndarray:
    """Sum of a per-rank quantity over each node (block placement: rank r on node r // gpus_per_node)."""
    out: np.ndarray = values.reshape(-1, gpus_per_node).sum(axis=1)
    return out


def host_link_bytes_s(cluster: Cluster, spec: Checkpoint | None) -> float:
    """Device-to-host bandwidth of one GPU: the checkpoint's ``host_link`` or the GPU's (its catalog entry)."""
    from slowlink.catalog import load_catalog

    name = spec.host_link if spec is not None else None
    if name is None:
        name = cluster.gpu.host_link
        if name is None:
            raise SpecError(f"checkpoint.host_link (None): gpu {cluster.gpu.name} has no known host interface: "
                            "set checkpoint.host_link to a catalog link, e.g. pcie-gen5")
    return load_catalog().link(name, "checkpoint.host_link").bw_bytes_s


@dataclass(frozen=True)
class CheckpointCost:
    """One checkpoint of a workload on a cluster: its size, who writes, and every time the model gives."""

    size: CheckpointSize
    mode: str
    layout: str
    writer_ranks: int
    writer_nodes: int
    node_bytes: float  # the busiest writing node
    write_s: float
    blocking_s: float
    drain_s: float
    restore_bytes: float
    restore_s: float
    interval_s: float | None
    host_bytes_per_node: float
    host_fits: bool | None
    binding: str  # "storage" or "client" for the write

    @property
    def drain_fits(self) -> bool | None:
        """Async: the drain ends before the next checkpoint starts."""
        return None if self.interval_s is None else self.drain_s <= self.interval_s

    def overhead_per_step_s(self, step_time_s: float) -> float | None:
        """Seconds per training step the checkpoints cost, amortised over the interval."""
        if self.interval_s is None:
            return None
        steps = max(1.0, self.interval_s / step_time_s)
        if self.mode == "sync":
            return self.write_s / steps
        return (self.blocking_s + max(0.0, self.drain_s - self.interval_s)) / steps

    def to_json(self) -> dict[str, object]:
        return {**self.size.to_json(), "mode": self.mode, "layout": self.layout, "writer_ranks": self.writer_ranks,
                "writer_nodes": self.writer_nodes, "checkpoint_write_s": self.write_s,
                "checkpoint_blocking_s": self.blocking_s, "drain_s": self.drain_s,
                "restore_bytes": self.restore_bytes, "checkpoint_restore_s": self.restore_s,
                "interval_s": self.interval_s, "host_gib_per_node": self.host_bytes_per_node / units.GiB,
                "host_fits": self.host_fits, "drain_fits": self.drain_fits, "write_binding": self.binding}


def interval_s(spec: Checkpoint | None, step_time_s: float) -> float | None:
    """Seconds between checkpoints: ``interval_steps x step time`` or ``interval_minutes x 60``."""
    if spec is None:
        return None
    if spec.interval_steps is not None:
        return spec.interval_steps * step_time_s
    return (spec.interval_minutes or 0.0) * units.MINUTE


def checkpoint_cost(w: Workload, cluster: Cluster, step_time_s: float) -> CheckpointCost:
    """Size, write, async staging and restore of ``w``'s checkpoint on ``cluster`` (module docstring)."""
    spec = w.checkpoint
    st = storage_of(cluster, "a checkpoint's write time")
    tier = details_of(st).checkpoint_tier
    size = checkpoint_size(w)
    layout = spec.layout if spec else "sharded"
    write, read = rank_bytes(w, size, layout)
    g = cluster.gpus_per_node
    nodes_w, nodes_r = per_node(write, g), per_node(read, g)
    client_w, storage_w = client_bytes_s(cluster, "write"), storage_bytes_s(cluster, "write", tier)
    node_bytes = float(nodes_w.max())
    write_s = transfer_time_s(node_bytes, client_w, size.total_bytes, storage_w)
    binding = "client" if node_bytes / client_w >= size.total_bytes / storage_w else "storage"
    restore_s = transfer_time_s(float(nodes_r.max()), client_bytes_s(cluster, "read"), float(read.sum()),
                                storage_bytes_s(cluster, "read", tier))
    mode = spec.mode if spec else "sync"
    blocking, host_fits = write_s, None
    if mode == "async":
        blocking = staging_time_s(float(write.max()), host_link_bytes_s(cluster, spec))
        if spec is not None and spec.host_staging_gib is not None:
            host_fits = node_bytes <= spec.host_staging_gib * units.GiB
    drain = write_s
    if spec is not None and spec.verified:  # sealed: each rank digests what it wrote, and what it reads back
        blocking, drain, _ = sealed_times(mode, write_s, blocking, drain, restore_s, digest_time_s(float(write.max())))
        restore_s += digest_time_s(float(read.max()))
    return CheckpointCost(size, mode, layout, int((write > 0).sum()), int((nodes_w > 0).sum()), node_bytes,
                          write_s, blocking, drain, float(read.sum()), restore_s, interval_s(spec, step_time_s),
                          node_bytes, host_fits, binding)

