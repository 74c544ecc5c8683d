"""Rendering of what slowlink.observe reads and finds: NCCL log summaries, IB ports, GPUs, doctor findings,
inventories."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:
    from slowlink.observe.checks import Finding
    from slowlink.observe.counters import Counters
    from slowlink.observe.hardware import GpuState, IbPort
    from slowlink.observe.inventory import NodeRecord
    from slowlink.observe.nccl_log import NcclLog
    from slowlink.observe.topo import GpuNics


def nccl_log_table(log: NcclLog, title: str) -> Table:
    """One row per fact of the log: version, ranks, nodes, network, transports, channels, algorithms."""
    t = Table(title=title)
    t.add_column("what")
    t.add_column("value")
    transports = ", ".join(f"{k} x{v}" for k, v in sorted(log.transports.items())) or "-"
    for what, value in (
        ("NCCL version", log.nccl_version or "-"), ("ranks", str(log.ranks or "-")), ("nodes", str(log.nodes)),
        ("network", log.network or "-"), ("connections", transports),
        ("GPUDirect RDMA connections", str(log.gdrdma)), ("channels", str(log.channels or "-")),
        ("algorithms", ", ".join(log.algorithms) or "-"), ("IB devices", ", ".join(log.ib_devices) or "-"),
        ("socket fall-back", "YES" if log.socket_fallback else "no"), ("warnings", str(len(log.warnings))),
    ):
        t.add_row(what, escape(value))
    return t


def ib_table(ports: tuple[IbPort, ...], title: str) -> Table:
    t = Table(title=title)
    for col in ("port", "state", "physical", "rate (Gbit/s)", "link layer", "firmware"):
        t.add_column(col)
    for p in ports:
        t.add_row(p.name, p.state, p.physical_state, f"{p.rate_gbit_s:g}", p.link_layer, p.firmware)
    return t


def _opt(v: float | None, fmt: str = "{:g}") -> str:
    return "-" if v is None else fmt.format(v)


def gpu_table(gpus: tuple[GpuState, ...], title: str) -> Table:
    t = Table(title=title)
    for col in ("gpu", "name", "driver", "temp (C)", "SM MHz", "max SM MHz", "power (W)", "slowdowns"):
        t.add_column(col)
    for g in gpus:
        t.add_row(str(g.index), g.name, g.driver_version or "-", _opt(g.temperature_c), _opt(g.sm_clock_mhz),
                  _opt(g.max_sm_clock_mhz), _opt(g.power_w), ", ".join(g.throttle_reasons) or "-")
    return t


_SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "ok": "green", "info": "dim"}


def findings_table(findings: list[Finding], title: str) -> Table:
    """Bottom-up: layer, severity, what, evidence (lines), fix."""
    t = Table(title=title, show_lines=True)
    for col in ("layer", "severity", "what", "evidence", "fix"):
        t.add_column(col, overflow="fold")
    for f in findings:
        t.add_row(f.layer, f"[{_SEVERITY_STYLE.get(f.severity, '')}]{f.severity}[/]", escape(f.what),
                  escape("\n".join(f.evidence)) or "-", escape(f.fix) or "-")
    return t


def doctor_summary(findings: list[Finding]) -> str:
    counts = {s: sum(f.severity == s for f in findings) for s in ("error", "warning", "ok")}
    return f"{counts['error']} error(s), {counts['warning']} warning(s), {counts['ok']} check(s) passed"


def inventory_table(records: list[NodeRecord], keys: list[str], mismatched: set[str], title: str) -> Table:
    """One column per node, one row per key; a key whose value differs across nodes is marked."""
    t = Table(title=title)
    t.add_column("key")
    for r in records:
        t.add_column(r.host)
    for k in keys:
        label = f"[bold red]{escape(k)} (differs)[/]" if k in mismatched else escape(k)
        t.add_row(label, *[escape(_cell(r.value(k))) for r in records])
    return t


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, list | tuple):
        return ", ".join(map(str, v)) or "-"
    return str(v)


def counters_table(c: Counters, title: str) -> Table:
    """Every counter; error counters above 0 marked."""
    t = Table(title=f"{title}: {c.tool} {c.device}")
    t.add_column("counter")
    t.add_column("value", justify="right")
    errs = c.errors()
    for k, v in c.values.items():
        t.add_row(f"[bold red]{escape(k)}[/]" if k in errs else escape(k), str(v))
    return t


def topo_table(gpus: tuple[GpuNics, ...], title: str) -> Table:
    t = Table(title=title)
    for col in ("GPU", "nearest NIC", "path", "NUMA", "GPUDirect RDMA"):
        t.add_column(col)
    for g in gpus:
        t.add_row(g.gpu, g.nic, g.path, g.numa or "-", "yes" if g.gdr else "[yellow]no[/]")
    return t
