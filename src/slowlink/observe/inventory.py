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

import importlib.metadata
import json
import platform
import re
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

# Keys compared across nodes (identity keys such as host and addresses are not).
COMPARED = ("os", "kernel", "python", "torch", "nccl", "gloo", "gpu_driver", "gpus", "gpu_model",
            "nic_speeds_mbit_s", "nic_shaped_mbit_s", "ib_rates_gbit_s", "ib_firmware", "nic_numa_nodes")


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


def nics(root: Path = Path("/sys/class/net")) -> list[dict[str, Any]]:
    """Every interface but loopback: name, operstate, speed (Mbit/s, None when the driver has none), MTU,
    driver, NUMA node (None for virtual devices or a single-node machine, sysfs -1)."""
    out = []
    for dev in sorted(root.iterdir()) if root.is_dir() else []:
        if dev.name == "lo":
            continue
        speed = _read(dev / "speed")
        numa = _read(dev / "device" / "numa_node")
        driver = (dev / "device" / "driver")
        out.append({"name": dev.name, "state": _read(dev / "operstate"),
                    "speed_mbit_s": int(speed) if speed and speed.lstrip("-").isdigit() and int(speed) > 0 else None,
                    "mtu": int(_read(dev / "mtu") or 0) or None,
                    "driver": driver.resolve().name if driver.exists() else None,
                    "numa_node": int(numa) if numa and numa.lstrip("-").isdigit() and int(numa) >= 0 else None})
    return out


def ib_ports(root: Path = Path("/sys/class/infiniband")) -> list[dict[str, Any]]:
    """Every IB port: device, port, state, rate in Gbit/s, firmware."""
    out = []
    for dev in sorted(root.iterdir()) if root.is_dir() else []:
        for port in sorted((dev / "ports").iterdir()) if (dev / "ports").is_dir() else []:
            rate = re.match(r"([0-9.]+)", _read(port / "rate") or "")
            state = _read(port / "state") or ""
            out.append({"name": f"{dev.name}:{port.name}", "state": state.split(":")[-1].strip() or None,
                        "rate_gbit_s": float(rate.group(1)) if rate else None, "firmware": _read(dev / "fw_ver")})
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


def torch_info() -> dict[str, Any]:
    """torch's version and whether its gloo and NCCL backends exist (torch imported only when installed)."""
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return {"torch": None, "gloo": None, "nccl": None}
    import torch
    import torch.distributed as dist

    nccl = None
    if dist.is_nccl_available() and torch.cuda.is_available():
        nccl = ".".join(map(str, torch.cuda.nccl.version()))  # type: ignore[no-untyped-call]
    return {"torch": version, "gloo": bool(dist.is_gloo_available()), "nccl": nccl}


def gpus() -> list[dict[str, Any]]:
    """GPUs from ``nvidia-smi --query-gpu`` (empty without nvidia-smi or when it fails)."""
    if shutil.which("nvidia-smi") is None:
        return []
    from slowlink.observe.hardware import parse_nvidia_smi_csv

    res = subprocess.run(["nvidia-smi", "--query-gpu=index,name,driver_version,pci.bus_id", "--format=csv"],
                         capture_output=True, text=True, check=False, timeout=20)
    if res.returncode != 0:
        return []
    return [{"index": g.index, "name": g.name, "driver": g.driver_version, "bus_id": g.bus_id}
            for g in parse_nvidia_smi_csv(res.stdout, "nvidia-smi")]


def collect() -> dict[str, Any]:
    """This node's record: the raw lists and the flat keys of :data:`COMPARED`."""
    net, ib, gpu = nics(), ib_ports(), gpus()
    shaped = shaped_rates_mbit_s([n["name"] for n in net])
    rec: dict[str, Any] = {"host": socket.gethostname(), "os": os_release(), "kernel": platform.release(),
                           "python": platform.python_version(), **torch_info(), "nics": net, "ib_ports": ib,
                           "gpu_list": gpu}
    rec["nic_summary"] = [" ".join(str(x) for x in (n["name"], n["state"], n["driver"], f"mtu {n['mtu']}") if x)
                          for n in net] or None
    rec["gpu_driver"] = sorted({g["driver"] for g in gpu if g["driver"]}) or None
    rec["gpus"] = len(gpu)
    rec["gpu_model"] = sorted({g["name"] for g in gpu}) or None
    rec["nic_speeds_mbit_s"] = [f"{n['name']}:{n['speed_mbit_s']}" for n in net if n["speed_mbit_s"]] or None
    rec["nic_shaped_mbit_s"] = [f"{d}:{r:g}" for d, r in sorted(shaped.items())] or None
    rec["nic_numa_nodes"] = [f"{n['name']}:{n['numa_node']}" for n in net if n["numa_node"] is not None] or None
    rec["ib_rates_gbit_s"] = [f"{p['name']}:{p['rate_gbit_s']:g}" for p in ib if p["rate_gbit_s"]] or None
    rec["ib_firmware"] = sorted({p["firmware"] for p in ib if p["firmware"]}) or None
    return rec


def mismatches(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """key -> {host: value} for every key of :data:`COMPARED` whose value is not the same on every node."""
    out = {}
    for key in COMPARED:
        values = {r.get("host", f"node{i}"): r.get(key) for i, r in enumerate(records)}
        if len({json.dumps(v, sort_keys=True) for v in values.values()}) > 1:
            out[key] = values
    return out


def gather_rank(_arg: Any, ctx: Any) -> list[dict[str, Any]]:
    """One rank of ``slowlink inventory --gather`` (``bench.launch.run``'s target, under torchrun or Slurm): every
    rank's record, all-gathered over the job's process group; a host with several ranks is named ``host:rN``."""
    import torch.distributed as dist

    recs: list[Any] = [None] * ctx.world
    dist.all_gather_object(recs, collect())
    hosts = [r["host"] for r in recs]
    for k, r in enumerate(recs):
        if hosts.count(r["host"]) > 1:
            r["host"] = f"{r['host']}:r{k}"
    return recs


def load_node(path: Path) -> dict[str, Any]:
    """A node's record written by ``slowlink inventory --json`` (a JSON object with ``host``)."""
    from slowlink.errors import SpecError
    from slowlink.fileio import read_text

    text = read_text(path, "inventory")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise SpecError(f"inventory ({str(path)!r}): not JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("host"), str):
        raise SpecError(f"{path}: host ({data.get('host') if isinstance(data, dict) else type(data).__name__!r}) "
                        "must be a string: write the file with `slowlink inventory --json`")
    return data


def main() -> None:
    print(json.dumps(collect()))


if __name__ == "__main__":
    main()
