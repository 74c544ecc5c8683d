"""Reader of NCCL_DEBUG=INFO logs: version, ranks and nodes, transports per connection, channels, algorithms,
IB devices and warnings, each with the line numbers that show it (the evidence ``doctor`` quotes).

Line format: ``HOST:PID:TID [DEV] NCCL INFO|WARN message`` (NCCL's debug.cc), optionally prefixed by a
launcher's rank tag (``[0] ``). Messages read, as NCCL 2.4-2.21 print them (public logs, e.g.
github.com/NVIDIA/nccl issues 676, 952, 1053, 1412): ``NCCL version X``; ``NET/IB : Using [0]mlx5_0:1/IB ...``;
``NET/IB : No device found.``; ``NET/Socket : Using [0]eth0:...``; ``Using network Socket|IB``; ``Channel cc/NN :``
(NN = channels); ``N coll channels``; ``Channel cc/0 : a[d] -> b[d] [send] via NET/IB/0/GDRDMA`` (one connection;
P2P, SHM, NET/IB, NET/Socket, NVLS, CollNet); ``Connected all rings|trees``, ``Connected NVLS``;
``comm 0x.. rank R nranks N`` / ``nRanks N nNodes M``.

Real captures (tests/data/observe/real/SOURCES.md) add: ``mpirun --tag-output`` tags before every line; the
source file and line of a WARN (``[0] misc/ibvwrap.cc:63 NCCL WARN``); NCCL 2.7's ``via direct shared memory``
for SHM; plugin networks with a space (``Using network AWS Libfabric``, ``via NET/AWS Libfabric/0``); RoCE
devices (``[0]mlx5_0:1/RoCE [RO]; OOB ...``); plugin messages that merely name CollNet
(``Failed to find ncclCollNetPlugin_v10 symbol``), which are no CollNet algorithm. CollNet is read from ``via
CollNet`` connections only: ``N coll channels, M collnet channels`` is no evidence, since later NCCL prints
nChannels in the collnet slot (src/init.cc; the 2.27.5 capture shows 16 with no CollNet connection).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slowlink.errors import SpecError
from slowlink.logtags import strip_launcher_tag
from slowlink.observe.common import read_input

# HOST:PID:TID [DEV] (file.cc:LINE )?NCCL LEVEL msg; WARN lines carry the source position (debug.cc).
_PREFIX = re.compile(r"^(?:\[\d+\]\s*)?(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+)\s+\[\d+\]\s+(?:\S+:\d+\s+)?"
                     r"NCCL\s+(?P<level>INFO|WARN|TRACE)\s+(?P<msg>.*)$")
_VERSION = re.compile(r"NCCL version (\S+)")
_NRANKS = re.compile(r"\bnranks (\d+)\b", re.IGNORECASE)
_NNODES = re.compile(r"\bnNodes (\d+)\b")
_CHANNEL_RING = re.compile(r"^Channel \d+/(\d+) :")
_COLL_CHANNELS = re.compile(r"^(\d+) coll channels")
_VIA = re.compile(r"\bvia (.+?)(?:\s+comm 0x|\s*$)")  # NCCL 2.2x may append "comm 0x.. nRanks NN"
_IB_USING = re.compile(r"^NET/IB : Using (.*)$")
_IB_DEVICE = re.compile(r"^\[\d+\](\S+)$")  # [0]mlx5_0:1/IB; [RO] and the OOB interface are not devices
_NETWORK = re.compile(r"^Using network (.+?)\s*$")
_ALGO_ENV = re.compile(r"^NCCL_ALGO set by environment to (\S+)")
_ALGO_MARKS = (("Connected all rings", "Ring"), ("Connected all trees", "Tree"), ("Connected NVLS", "NVLS"))


@dataclass(frozen=True)
class NcclLog:
    """What one NCCL_DEBUG=INFO log says; ``evidence`` maps a finding name to (line number, line) pairs."""

    nccl_version: str | None
    ranks: int | None
    nodes: int
    hostnames: tuple[str, ...]
    network: str | None  # "IB" or "Socket" (``Using network X``), None when not logged
    transports: dict[str, int]  # connections per transport class: P2P, SHM, NET/IB, NET/Socket, NVLS, CollNet
    gdrdma: int  # NET/IB connections using GPUDirect RDMA
    channels: int | None
    algorithms: tuple[str, ...]
    ib_devices: tuple[str, ...]
    warnings: tuple[str, ...]
    evidence: dict[str, list[tuple[int, str]]] = field(default_factory=dict)

    @property
    def socket_fallback(self) -> bool:
        """Inter-node traffic on sockets: a ``via NET/Socket`` connection, or ``Using network Socket`` with more
        than one node. One node alone prints ``Using network Socket`` when it finds no IB device, yet sends
        nothing over the network (real capture nccl-log-2.20.5-1node-2gpu-nccl-tests.txt: P2P only)."""
        return self.transports.get("NET/Socket", 0) > 0 or (self.network == "Socket" and self.nodes > 1)

    def to_json(self) -> dict[str, Any]:
        return {"nccl_version": self.nccl_version, "ranks": self.ranks, "nodes": self.nodes,
                "hostnames": list(self.hostnames), "network": self.network, "transports": self.transports,
                "gdrdma": self.gdrdma, "channels": self.channels, "algorithms": list(self.algorithms),
                "ib_devices": list(self.ib_devices), "warnings": list(self.warnings),
                "socket_fallback": self.socket_fallback,
                "evidence": {k: [{"line": n, "text": t} for n, t in v] for k, v in self.evidence.items()}}


def transport_class(via: str) -> str:
    """``NET/IB/0/GDRDMA`` -> ``NET/IB``; ``NET/AWS Libfabric/0`` -> ``NET/AWS Libfabric``; ``P2P/IPC/read`` ->
    ``P2P``; ``SHM/direct/direct`` and NCCL 2.7's ``direct shared memory`` -> ``SHM``."""
    if via.startswith("direct shared memory"):
        return "SHM"
    parts = via.split("/")
    return "/".join(parts[:2]) if parts[0] == "NET" else parts[0]


@dataclass
class _Acc:
    """What the scan has gathered so far (private; frozen into :class:`NcclLog` at the end)."""

    version: str | None = None
    ranks: int | None = None
    nodes: int | None = None
    network: str | None = None
    channels: int | None = None
    gdrdma: int = 0
    hosts: dict[str, None] = field(default_factory=dict)
    transports: dict[str, int] = field(default_factory=dict)
    algos: dict[str, None] = field(default_factory=dict)
    ib: dict[str, None] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    evidence: dict[str, list[tuple[int, str]]] = field(default_factory=dict)

    def note(self, what: str, lineno: int, line: str) -> None:
        self.evidence.setdefault(what, []).append((lineno, line.strip()))


def _message(acc: _Acc, msg: str, lineno: int, line: str) -> None:
    """Fold one INFO message into ``acc``."""
    if m := _NRANKS.search(msg):
        acc.ranks = max(acc.ranks or 0, int(m.group(1)))
    if m := _NNODES.search(msg):
        acc.nodes = int(m.group(1))
    if (m := _CHANNEL_RING.match(msg)) or (m := _COLL_CHANNELS.match(msg)):
        acc.channels = max(acc.channels or 0, int(m.group(1)))
    if (m := _VIA.search(msg)) and msg.startswith("Channel"):
        kind = transport_class(m.group(1))
        acc.transports[kind] = acc.transports.get(kind, 0) + 1
        acc.gdrdma += "GDRDMA" in m.group(1)
        if kind == "NET/Socket":
            acc.note("socket_connection", lineno, line)
        elif kind == "CollNet":
            acc.algos["CollNet"] = None
    if m := _NETWORK.match(msg):
        acc.network = m.group(1)
        acc.note(f"network_{acc.network.lower()}", lineno, line)
    if m := _IB_USING.match(msg):
        acc.ib.update(dict.fromkeys(d.group(1) for tok in m.group(1).split() if (d := _IB_DEVICE.match(tok))))
    if msg.startswith("NET/IB : No device found") or "libibverbs" in msg:
        acc.note("no_ib", lineno, line)
    if m := _ALGO_ENV.match(msg):
        acc.algos.update(dict.fromkeys(m.group(1).split(",")))
        acc.note("algo_forced", lineno, line)
    for mark, algo in _ALGO_MARKS:
        if mark in msg:
            acc.algos[algo] = None


def parse_nccl_log(text: str, source: str = "nccl-log") -> NcclLog:
    """Parse an NCCL_DEBUG=INFO log; lines of other programs in between are skipped."""
    acc = _Acc()
    seen = 0
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = strip_launcher_tag(raw.strip())
        if m := _VERSION.search(line):
            acc.version = acc.version or m.group(1)
            acc.note("version", lineno, line)
            seen += 1
        p = _PREFIX.match(line)
        if p is None:
            continue
        seen += 1
        acc.hosts[p.group("host")] = None
        if p.group("level") == "WARN":
            acc.warnings.append(p.group("msg").strip())
            acc.note("warning", lineno, line)
            if "libibverbs" in p.group("msg"):  # NCCL <= 2.8: "misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs"
                acc.note("no_ib", lineno, line)
        else:
            _message(acc, p.group("msg"), lineno, line)
    if not seen:
        raise SpecError(f"{source}: no NCCL log line ('HOST:PID:TID [DEV] NCCL INFO ...' or 'NCCL version X') "
                        "was found: run with NCCL_DEBUG=INFO")
    return NcclLog(nccl_version=acc.version, ranks=acc.ranks, nodes=acc.nodes or max(1, len(acc.hosts)),
                   hostnames=tuple(acc.hosts), network=acc.network, transports=acc.transports,
                   gdrdma=acc.gdrdma, channels=acc.channels, algorithms=tuple(acc.algos),
                   ib_devices=tuple(acc.ib), warnings=tuple(acc.warnings), evidence=acc.evidence)


def load_nccl_log(path: Path | str) -> NcclLog:
    """Read and parse an NCCL_DEBUG=INFO log file."""
    return parse_nccl_log(read_input(path, "NCCL log"), str(path))
