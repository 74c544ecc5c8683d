"""What a node has: OS, kernel, Python, torch and its NCCL/gloo, NICs (``/sys/class/net``: state, speed, MTU,
driver, NUMA node; the tbf rate a link is shaped to), InfiniBand ports (``/sys/class/infiniband``: state,
rate, firmware) and GPUs (``nvidia-smi`` when present). Missing tools and files are skipped, never fatal.

Across nodes, :func:`mismatches` names every key whose value differs, the seed's list of what must agree:
driver, firmware, NCCL, torch, kernel, NIC speed, NUMA placement. Run as ``python -m slowlink.observe.inventory``
it prints this node's record as JSON (what ``slowlink inventory --emulated`` runs in every node).

sysfs files read: Documentation/ABI/testing/sysfs-class-net (operstate, speed in Mbit/s, mtu) and
Documentation/ABI/stable/sysfs-class-infiniband (ports/N/state ``4: ACTIVE``, rate ``400 Gb/sec (4X NDR)``,
fw_ver) of the Linux kernel.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import platform
import re
import shutil
import socket
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import TypeAdapter

# Keys compared across nodes (identity keys such as host and addresses are not): fields of NodeRecord.
COMPARED = ("os", "kernel", "python", "torch", "nccl", "gloo", "gpu_driver", "gpus", "gpu_model",
            "nic_speeds_mbit_s", "nic_shaped_mbit_s", "ib_rates_gbit_s", "ib_firmware", "nic_numa_nodes")


@dataclass(frozen=True)
class Nic:
    """An interface as sysfs shows it (speed None when the driver has none; NUMA node None when virtual)."""

    name: str
    state: str | None = None
    speed_mbit_s: int | None = None
    mtu: int | None = None
    driver: str | None = None
    numa_node: int | None = None


@dataclass(frozen=True)
class SysfsIbPort:
    """An InfiniBand port (``device:port``), its state, rate in Gbit/s and its device's firmware."""

    name: str
    state: str | None = None
    rate_gbit_s: float | None = None
    firmware: str | None = None


@dataclass(frozen=True)
class NodeGpu:
    """A GPU as ``nvidia-smi --query-gpu`` lists it."""

    index: int
    name: str
    driver: str | None = None
    bus_id: str | None = None


@dataclass(frozen=True)
class NodeRecord:
    """What one node has: the values compared across nodes (:data:`COMPARED`), and the lists they come from
    (empty in a record that carries only the compared values). ``to_json`` is ``slowlink inventory --json``."""

    host: str
    os: str | None = None
    kernel: str | None = None
    python: str | None = None
    torch: str | None = None
    gloo: bool | None = None
    nccl: str | None = None
    nics: tuple[Nic, ...] = ()
    ib_ports: tuple[SysfsIbPort, ...] = ()
    gpu_list: tuple[NodeGpu, ...] = ()
    nic_summary: tuple[str, ...] | None = None
    gpu_driver: tuple[str, ...] | None = None
    gpus: int = 0
    gpu_model: tuple[str, ...] | None = None
    nic_speeds_mbit_s: tuple[str, ...] | None = None
    nic_shaped_mbit_s: tuple[str, ...] | None = None
    nic_numa_nodes: tuple[str, ...] | None = None
    ib_rates_gbit_s: tuple[str, ...] | None = None
    ib_firmware: tuple[str, ...] | None = None

    def value(self, key: str) -> object:
        """The value of a compared key (or ``host``, ``nic_summary``) as the JSON record has it."""
        return self.to_json()[key]

    def renamed(self, host: str) -> NodeRecord:
        return NodeRecord(**{**self.__dict__, "host": host})

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: object, source: str) -> NodeRecord:
        """A record read back (a node file, another rank's or node's answer): types checked, unknown keys kept
        out; a message naming the key, the value and the rule otherwise."""
        from slowlink.errors import SpecError
        from slowlink.fileio import adapted

        if not isinstance(data, dict) or not isinstance(data.get("host"), str):
            got = data.get("host") if isinstance(data, dict) else type(data).__name__
            raise SpecError(f"{source}: host ({got!r}) must be a string: write the file with "
                            "`slowlink inventory --json`")
        return adapted(_record_adapter(), data, source, "inventory")


@functools.cache
def _record_adapter() -> TypeAdapter[NodeRecord]:
    """pydantic's validator of a NodeRecord (built on first use: collecting a record needs no pydantic)."""
    from pydantic import TypeAdapter

    return TypeAdapter(NodeRecord)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def os_release(etc: Path = Path("/etc")) -> str | None:
    """PRETTY_NAME of os-release(5)."""
    text = _read(etc / "os-release") or ""
    m = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', text, re.M)
    return m.group(1) if m else None


def nics(root: Path = Path("/sys/class/net")) -> list[Nic]:
    """Every interface but loopback: name, operstate, speed (Mbit/s, None when the driver has none), MTU,
    driver, NUMA node (None for virtual devices or a single-node machine, sysfs -1)."""
    out = []
    for dev in sorted(root.iterdir()) if root.is_dir() else []:
        if dev.name == "lo":
            continue
        speed = _read(dev / "speed")
        numa = _read(dev / "device" / "numa_node")
        driver = (dev / "device" / "driver")
        out.append(Nic(dev.name, _read(dev / "operstate"),
                       int(speed) if speed and speed.lstrip("-").isdigit() and int(speed) > 0 else None,
                       int(_read(dev / "mtu") or 0) or None,
                       driver.resolve().name if driver.exists() else None,
                       int(numa) if numa and numa.lstrip("-").isdigit() and int(numa) >= 0 else None))
    return out


def ib_ports(root: Path = Path("/sys/class/infiniband")) -> list[SysfsIbPort]:
    """Every IB port: device, port, state, rate in Gbit/s, firmware."""
    out = []
    for dev in sorted(root.iterdir()) if root.is_dir() else []:
        for port in sorted((dev / "ports").iterdir()) if (dev / "ports").is_dir() else []:
            rate = re.match(r"([0-9.]+)", _read(port / "rate") or "")
            state = _read(port / "state") or ""
            out.append(SysfsIbPort(f"{dev.name}:{port.name}", state.split(":")[-1].strip() or None,
                              float(rate.group(1)) if rate else None, _read(dev / "fw_ver")))
    return out


_TBF_RATE = re.compile(r"\brate (\d+(?:\.\d+)?)([KMG]?)bit\b")
_RATE_UNITS = {"": 1e-6, "K": 1e-3, "M": 1.0, "G": 1e3}


def tbf_rate_mbit_s(tc_output: str) -> float | None:
    """The rate of the tbf qdisc in ``tc qdisc show`` output, Mbit/s (None when there is none)."""
    m = _TBF_RATE.search(tc_output)
    return float(m.group(1)) * _RATE_UNITS[m.group(2)] if m else None


def shaped_rates_mbit_s(devices: list[str]) -> dict[str, float]:
    """The tbf rate (``tc qdisc show dev X``) each device is shaped to, Mbit/s, where one is set."""
    if shutil.which("tc") is None:
        return {}
    out = {}
    for dev in devices:
        res = subprocess.run(["tc", "qdisc", "show", "dev", dev], capture_output=True, text=True, check=False,
                             timeout=10)
        rate = tbf_rate_mbit_s(res.stdout)
        if rate is not None:
            out[dev] = rate
    return out


def torch_info() -> tuple[str | None, bool | None, str | None]:
    """torch's version, whether its gloo backend exists, and its NCCL version (None without CUDA or NCCL); torch
    imported only when installed."""
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None, None, None
    import torch
    import torch.distributed as dist

    nccl = None
    if dist.is_nccl_available() and torch.cuda.is_available():
        nccl = ".".join(map(str, torch.cuda.nccl.version()))  # type: ignore[no-untyped-call]
    return version, bool(dist.is_gloo_available()), nccl


def gpus() -> list[NodeGpu]:
    """GPUs from ``nvidia-smi --query-gpu`` (empty without nvidia-smi or when it fails)."""
    if shutil.which("nvidia-smi") is None:
        return []
    from slowlink.observe.hardware import parse_nvidia_smi_csv

    res = subprocess.run(["nvidia-smi", "--query-gpu=index,name,driver_version,pci.bus_id", "--format=csv"],
                         capture_output=True, text=True, check=False, timeout=20)
    if res.returncode != 0:
        return []
    return [NodeGpu(g.index, g.name, g.driver_version, g.bus_id)
            for g in parse_nvidia_smi_csv(res.stdout, "nvidia-smi")]


def collect() -> NodeRecord:
    """This node's record: the lists read from sysfs and nvidia-smi, and the values of :data:`COMPARED`."""
    net, ib, gpu = nics(), ib_ports(), gpus()
    shaped = shaped_rates_mbit_s([n.name for n in net])
    torch, gloo, nccl = torch_info()
    return NodeRecord(
        host=socket.gethostname(), os=os_release(), kernel=platform.release(), python=platform.python_version(),
        torch=torch, gloo=gloo, nccl=nccl, nics=tuple(net), ib_ports=tuple(ib), gpu_list=tuple(gpu),
        nic_summary=tuple(" ".join(str(x) for x in (n.name, n.state, n.driver, f"mtu {n.mtu}") if x)
                          for n in net) or None,
        gpu_driver=tuple(sorted({g.driver for g in gpu if g.driver})) or None,
        gpus=len(gpu),
        gpu_model=tuple(sorted({g.name for g in gpu})) or None,
        nic_speeds_mbit_s=tuple(f"{n.name}:{n.speed_mbit_s}" for n in net if n.speed_mbit_s) or None,
        nic_shaped_mbit_s=tuple(f"{d}:{r:g}" for d, r in sorted(shaped.items())) or None,
        nic_numa_nodes=tuple(f"{n.name}:{n.numa_node}" for n in net if n.numa_node is not None) or None,
        ib_rates_gbit_s=tuple(f"{p.name}:{p.rate_gbit_s:g}" for p in ib if p.rate_gbit_s) or None,
        ib_firmware=tuple(sorted({p.firmware for p in ib if p.firmware})) or None)


def mismatches(records: list[NodeRecord]) -> dict[str, dict[str, object]]:
    """key -> {host: value} for every key of :data:`COMPARED` whose value is not the same on every node."""
    out = {}
    for key in COMPARED:
        values = {r.host: r.value(key) for r in records}
        if len({json.dumps(v, sort_keys=True) for v in values.values()}) > 1:
            out[key] = values
    return out


def gather_rank(_arg: Any, ctx: Any) -> list[NodeRecord]:
    """One rank of ``slowlink inventory --gather`` (``bench.launch.run``'s target, under torchrun or Slurm): every
    rank's record, all-gathered over the job's process group; a host with several ranks is named ``host:rN``."""
    import torch.distributed as dist

    recs: list[Any] = [None] * ctx.world
    dist.all_gather_object(recs, collect().to_json())
    got = [NodeRecord.from_json(r, f"rank {k}") for k, r in enumerate(recs)]
    hosts = [r.host for r in got]
    return [r.renamed(f"{r.host}:r{k}") if hosts.count(r.host) > 1 else r for k, r in enumerate(got)]


def load_node(path: Path) -> NodeRecord:
    """A node's record written by ``slowlink inventory --json`` (a JSON object with ``host``)."""
    from slowlink.errors import SpecError
    from slowlink.fileio import read_text

    text = read_text(path, "inventory")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise SpecError(f"inventory ({str(path)!r}): not JSON: {exc}") from None
    return NodeRecord.from_json(data, str(path))


def main() -> None:
    print(json.dumps(collect().to_json()))


if __name__ == "__main__":
    main()
