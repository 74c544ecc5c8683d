"""Readers of node hardware state: ``ibstat`` (InfiniBand ports) and ``nvidia-smi --query-gpu ... --format=csv``.

``ibstat`` (infiniband-diags, man ibstat(8)) prints ``CA 'name'`` blocks with ``Firmware version:`` and per
port ``State:`` (Down, Initializing, Armed, Active), ``Physical state:`` (Polling, LinkUp...), ``Rate:`` in
Gbit/s and ``Link layer:`` (InfiniBand or Ethernet for RoCE).

``nvidia-smi --query-gpu=FIELDS --format=csv`` (``nvidia-smi --help-query-gpu``) prints a header of the field
names, each with its unit in brackets (``clocks.sm [MHz]``), then one line per GPU; values carry the unit
(``1980 MHz``). ``clocks_throttle_reasons.active`` (renamed ``clocks_event_reasons.active`` in newer drivers)
is NVML's bit mask ``nvmlClocksThrottleReasons`` (docs.nvidia.com/deploy/nvml-api, group
nvmlClocksThrottleReasons): see :data:`THROTTLE_BITS`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slowlink.errors import SpecError
from slowlink.observe.common import line_error, read_input

# NVML nvmlClocksThrottleReasons bits -> (name, is it a slowdown to act on). Idle, application clocks and
# display clocks are not problems; a power cap is expected under load but costs clock; the rest are events.
THROTTLE_BITS: dict[int, tuple[str, bool]] = {
    0x1: ("gpu_idle", False), 0x2: ("applications_clocks_setting", False), 0x4: ("sw_power_cap", True),
    0x8: ("hw_slowdown", True), 0x10: ("sync_boost", False), 0x20: ("sw_thermal_slowdown", True),
    0x40: ("hw_thermal_slowdown", True), 0x80: ("hw_power_brake_slowdown", True),
    0x100: ("display_clock_setting", False),
}


@dataclass(frozen=True)
class IbPort:
    """One port of one host channel adapter as ``ibstat`` shows it."""

    ca: str
    port: int
    state: str
    physical_state: str
    rate_gbit_s: float
    link_layer: str
    firmware: str
    line: int  # the line of the port's Rate
    ca_type: str = ""  # the adapter's model (MT4129 = ConnectX-7): ports and firmware compare within one type

    @property
    def name(self) -> str:
        return f"{self.ca}:{self.port}"

    @property
    def up(self) -> bool:
        return self.state == "Active" and self.physical_state == "LinkUp"


_CA = re.compile(r"^CA '([^']+)'")
_PORT = re.compile(r"^Port (\d+):")
_KV = re.compile(r"^([A-Za-z ]+):\s*(.*)$")


def parse_ibstat(text: str, source: str = "ibstat") -> tuple[IbPort, ...]:
    """Every port of every CA in ``ibstat`` output."""
    ports: list[IbPort] = []
    ca, fw, ca_type, port, fields, rate_line = "", "", "", 0, dict[str, str](), 0

    def close() -> None:
        if port:
            _port(source, ports, ca, port, fw, fields, rate_line, ca_type)

    for lineno, raw in enumerate(text.splitlines(), start=1):
        s = raw.strip()
        if m := _CA.match(s):
            close()
            ca, fw, port, fields = m.group(1), "", 0, {}
        elif m := _PORT.match(s):
            close()
            port, fields = int(m.group(1)), {}
        elif (m := _KV.match(s)) and ca:
            key, value = m.group(1).strip(), m.group(2).strip()
            if key == "Firmware version":
                fw = value
            elif key == "CA type":
                ca_type = value
            elif port:
                fields[key] = value
                rate_line = lineno if key == "Rate" else rate_line
        elif s:
            raise line_error(source, lineno, raw, "is not ibstat output ('CA ...', 'Port N:' or 'Key: value')")
    close()
    if not ports:
        raise SpecError(f"{source}: no InfiniBand port found (no \"CA 'name'\" block with a 'Port N:')")
    return tuple(ports)


def _port(source: str, ports: list[IbPort], ca: str, port: int, fw: str, f: dict[str, str], line: int,
          ca_type: str) -> None:
    for key in ("State", "Physical state", "Rate"):
        if key not in f:
            raise SpecError(f"{source}: {ca} port {port}: {key} (missing) must be given: truncated ibstat output?")
    try:
        rate = float(f["Rate"])
    except ValueError:
        raise line_error(source, line, f"Rate: {f['Rate']}", "Rate must be a number of Gbit/s") from None
    ports.append(IbPort(ca=ca, port=port, state=f["State"], physical_state=f["Physical state"],
                        rate_gbit_s=rate, link_layer=f.get("Link layer", "InfiniBand"), firmware=fw, line=line,
                        ca_type=ca_type))


@dataclass(frozen=True)
class GpuState:
    """One GPU line of ``nvidia-smi --query-gpu`` CSV; fields not queried are None."""

    index: int
    name: str
    driver_version: str | None
    bus_id: str | None
    temperature_c: float | None
    sm_clock_mhz: float | None
    max_sm_clock_mhz: float | None
    power_w: float | None
    throttle_mask: int | None
    line: int
    ecc_uncorrectable: int | None = None  # volatile uncorrectable DRAM ECC errors (nvidia-smi -q -x)
    remap_pending: bool = False  # a row remap waits for a GPU reset
    remap_failure: bool = False  # no spare row left: the GPU needs replacing

    @property
    def throttle_reasons(self) -> tuple[str, ...]:
        """Names of the active NVML throttle bits that cost clock (idle, app and display clocks left out)."""
        mask = self.throttle_mask or 0
        return tuple(name for bit, (name, bad) in THROTTLE_BITS.items() if mask & bit and bad)


_FIELDS = {"index": "index", "name": "name", "driver_version": "driver_version", "pci.bus_id": "bus_id",
           "temperature.gpu": "temperature_c", "clocks.sm": "sm_clock_mhz", "clocks.current.sm": "sm_clock_mhz",
           "clocks.max.sm": "max_sm_clock_mhz", "power.draw": "power_w",
           "clocks_throttle_reasons.active": "throttle_mask", "clocks_event_reasons.active": "throttle_mask",
           # the fields -q -x reads too (nvidia-smi --help-query-gpu; present in the real capture
           # nvidia-smi-query-gpu-h100-vm-load.csv, driver 590.48.01)
           "ecc.errors.uncorrected.volatile.dram": "ecc_uncorrectable", "remapped_rows.pending": "remap_pending",
           "remapped_rows.failure": "remap_failure"}
_FLAGS = ("remap_pending", "remap_failure")  # Yes/No
_EMPTY: dict[str, Any] = {f: None for f in _FIELDS.values()} | {"name": "unknown"} | dict.fromkeys(_FLAGS, False)
_NUMERIC = ("temperature_c", "sm_clock_mhz", "max_sm_clock_mhz", "power_w")


def _value(key: str, raw: str, source: str, lineno: int, line: str) -> object:
    if raw in ("[N/A]", "N/A", "[Not Supported]", ""):
        return False if key in _FLAGS else None
    if key in _FLAGS:
        if raw not in ("Yes", "No"):
            raise line_error(source, lineno, line, f"field {key} ({raw!r}) must be Yes or No")
        return raw == "Yes"
    try:
        if key in ("index", "ecc_uncorrectable"):
            return int(raw)
        if key == "throttle_mask":
            return int(raw, 16)
        if key in _NUMERIC:
            return float(raw.split()[0])
    except ValueError:
        raise line_error(source, lineno, line, f"field {key} ({raw!r}) must be a number") from None
    return raw


def parse_nvidia_smi_csv(text: str, source: str = "nvidia-smi") -> tuple[GpuState, ...]:
    """GPUs of ``nvidia-smi --query-gpu=index,name,...`` CSV (header required; ``noheader`` is refused)."""
    lines = [(n, ln) for n, ln in enumerate(text.splitlines(), start=1) if ln.strip()]
    if not lines:
        raise SpecError(f"{source}: nvidia-smi CSV is empty")
    header = [h.strip().split(" [")[0] for h in lines[0][1].split(",")]
    if "index" not in header:
        raise line_error(source, lines[0][0], lines[0][1], "must be the CSV header with 'index' "
                         "(run nvidia-smi --query-gpu=index,... --format=csv, without noheader)")
    gpus = []
    for lineno, line in lines[1:]:
        vals = [v.strip() for v in line.split(",")]
        if len(vals) != len(header):
            raise line_error(source, lineno, line, f"has {len(vals)} fields, the header has {len(header)}")
        got: dict[str, Any] = {_FIELDS[h]: _value(_FIELDS[h], v, source, lineno, line)
               for h, v in zip(header, vals, strict=True) if h in _FIELDS}
        if got.get("index") is None:
            raise line_error(source, lineno, line, "field index must be a GPU number")
        gpus.append(GpuState(**{**_EMPTY, **got, "line": lineno}))
    return tuple(gpus)


def load_ibstat(path: Path | str) -> tuple[IbPort, ...]:
    return parse_ibstat(read_input(path, "ibstat output"), str(path))


def load_nvidia_smi(path: Path | str) -> tuple[GpuState, ...]:
    return parse_nvidia_smi_csv(read_input(path, "nvidia-smi CSV"), str(path))


@dataclass(frozen=True)
class NicDriver:
    """``ethtool -i DEV``: the NIC's driver, its version, the firmware and the PCI address."""

    driver: str
    version: str | None
    firmware: str | None
    bus_info: str | None
    line: int  # the firmware-version line (the driver line when there is none)
    version_line: int = 0  # the version line (the driver line when there is none)


def parse_ethtool_info(text: str, source: str = "ethtool -i") -> NicDriver:
    """``driver:``, ``version:``, ``firmware-version:`` and ``bus-info:`` of ``ethtool -i`` (ethtool(8))."""
    fields: dict[str, tuple[str, int]] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        key, sep, value = raw.partition(":")
        if not sep:
            raise line_error(source, lineno, raw, "is not ethtool -i output ('key: value')")
        fields[key.strip()] = (value.strip(), lineno)
    if "driver" not in fields:
        raise SpecError(f"{source}: driver (missing) must be given: not ethtool -i output")

    def get(key: str) -> str | None:
        return fields[key][0] or None if key in fields else None

    fw = get("firmware-version")
    return NicDriver(driver=fields["driver"][0], version=get("version"),
                     firmware=fw.split(" (")[0] if fw else None, bus_info=get("bus-info"),
                     line=fields.get("firmware-version", fields["driver"])[1],
                     version_line=fields.get("version", fields["driver"])[1])


_IBV_STATE = {"PORT_ACTIVE": "Active", "PORT_DOWN": "Down", "PORT_INIT": "Initializing", "PORT_ARMED": "Armed"}
_IBV_PHYS = {"LINK_UP": "LinkUp", "POLLING": "Polling", "DISABLED": "Disabled", "SLEEP": "Sleep"}


def parse_ibv_devinfo(text: str, source: str = "ibv_devinfo") -> tuple[IbPort, ...]:
    """``ibv_devinfo -v`` (rdma-core): ``hca_id`` blocks with ``fw_ver``, ``vendor_part_id`` and per port
    ``state``, ``phys_state``, ``link_layer``, ``active_width`` (``4X``) and ``active_speed`` (``100.0 Gbps``
    per lane); rate = lanes x per-lane speed, as ibstat's ``Rate``. Without ``-v`` (no width, speed or physical
    state) the rate is unknown: refused, since the port's rate is what the doctor checks. Inside an ``hca_id``
    block, ``-v`` prints lines without a colon (capability flag names under ``device_cap_flags``, ``NO SUPPORT``,
    ``ooo_rc_caps  = 0x0``, ``tag matching not supported``: real capture ibv_devinfo-v-mlx4-port2-polling.txt);
    they carry nothing read here and are skipped."""
    ports: list[IbPort] = []
    hca, fw, part, port = "", "", "", 0
    f: dict[str, tuple[str, int]] = {}

    def close() -> None:
        if port:
            ports.append(_ibv_port(source, hca, port, fw, part, f))

    for lineno, raw in enumerate(text.splitlines(), start=1):
        key, sep, value = raw.strip().partition(":")
        if not sep:
            if raw.strip() and not hca:
                raise line_error(source, lineno, raw, "is not ibv_devinfo output ('key: value')")
            continue
        key, value = key.strip(), value.strip()
        if key == "hca_id":
            close()
            hca, fw, part, port, f = value, "", "", 0, {}
        elif key == "port":
            close()
            port, f = int(value) if value.isdigit() else 0, {}
        elif key == "fw_ver":
            fw = value
        elif key == "vendor_part_id":
            part = f"MT{value}"
        elif port:
            f[key] = (value, lineno)
    close()
    if not ports:
        raise SpecError(f"{source}: no port found (no 'hca_id:' block with a 'port:'): not ibv_devinfo output")
    return tuple(ports)


def _ibv_port(source: str, hca: str, port: int, fw: str, part: str, f: dict[str, tuple[str, int]]) -> IbPort:
    for key in ("state", "phys_state", "active_width", "active_speed"):
        if key not in f:
            raise SpecError(f"{source}: {hca} port {port}: {key} (missing) must be given: run ibv_devinfo -v")
    width, line = f["active_width"]
    speed = f["active_speed"][0]
    m_w, m_s = re.match(r"(\d+)X", width), re.match(r"([0-9.]+)\s*Gbps", speed)
    if m_w is None or m_s is None:
        raise line_error(source, line, f"active_width: {width}, active_speed: {speed}",
                         "width must be NX and speed N Gbps")
    state, phys = f["state"][0].split()[0], f["phys_state"][0].split()[0]
    return IbPort(ca=hca, port=port, state=_IBV_STATE.get(state, state), physical_state=_IBV_PHYS.get(phys, phys),
                  rate_gbit_s=int(m_w.group(1)) * float(m_s.group(1)),
                  link_layer=f.get("link_layer", ("InfiniBand", 0))[0], firmware=fw, line=f["active_speed"][1],
                  ca_type=part)
