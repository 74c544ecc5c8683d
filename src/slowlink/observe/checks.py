"""The doctor's checks, one function per layer, bottom-up as the seed orders troubleshooting: physical links
(ports down, a port trained below its peers), GPUs (thermal and power slowdowns), versions (driver, NIC
firmware, NCCL, torch: a minor version apart can cost 10% and report no error), NCCL's transport (a silent
fall-back from IB to sockets, no GPUDirect RDMA), and last the collectives' bus bandwidth against the model
and a baseline. Each returns :class:`Finding` s with the evidence (``file:line: text``) and a fix.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slowlink.bench.nccl_tests import NcclTestsRun
from slowlink.bench.record import Record
from slowlink.observe.counters import Counters
from slowlink.observe.hardware import GpuState, IbPort, NicDriver
from slowlink.observe.nccl_log import NcclLog
from slowlink.observe.pcie import PcieLink
from slowlink.observe.topo import GDR_PATHS, GpuNics

LAYERS = ("link", "gpu", "versions", "affinity", "transport", "collective")
SEVERITIES = ("ok", "warning", "error")
_EVIDENCE_LINES = 2  # lines of evidence quoted per kind: enough to locate, few enough to read


@dataclass(frozen=True)
class Finding:
    """One verdict: its layer (:data:`LAYERS`), severity (:data:`SEVERITIES`), what, evidence and fix."""

    layer: str
    severity: str
    what: str
    evidence: tuple[str, ...] = ()
    fix: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"layer": self.layer, "severity": self.severity, "what": self.what,
                "evidence": list(self.evidence), "fix": self.fix}


@dataclass(frozen=True)
class Inputs:
    """What the doctor was given, each item with the file it came from."""

    ibstat: tuple[tuple[str, tuple[IbPort, ...]], ...] = ()
    gpus: tuple[tuple[str, tuple[GpuState, ...]], ...] = ()
    logs: tuple[tuple[str, NcclLog], ...] = ()
    tables: tuple[tuple[str, NcclTestsRun], ...] = ()
    records: tuple[tuple[str, Record], ...] = ()
    counters: tuple[tuple[str, Counters], ...] = ()
    topo: tuple[tuple[str, tuple[GpuNics, ...]], ...] = ()
    drivers: tuple[tuple[str, NicDriver], ...] = ()
    pcie: tuple[tuple[str, tuple[PcieLink, ...]], ...] = ()


def check_links(inp: Inputs) -> list[Finding]:
    """Ports down (State/Physical state) are errors; an Active port whose rate is below the fastest port of
    its link layer, anywhere in the inputs, was trained at a lower speed (bad cable or transceiver): a warning."""
    out: list[Finding] = []
    ports = [(src, p) for src, ps in inp.ibstat for p in ps]
    for src, p in ports:
        if not p.up:
            out.append(Finding("link", "error", f"{p.name} is not up ({p.state}, {p.physical_state})",
                               (f"{src}:{p.line}: {p.ca} port {p.port}: State {p.state}, Physical state "
                                f"{p.physical_state}",), _port_fix(p)))
    for kind in {(p.link_layer, p.ca_type) for _, p in ports}:  # a 200G HCA is not slow beside a 400G one
        up = [(s, p) for s, p in ports if p.up and (p.link_layer, p.ca_type) == kind]
        top = max((p.rate_gbit_s for _, p in up), default=0.0)
        for src, p in up:
            if p.rate_gbit_s < top:
                out.append(Finding("link", "warning",
                                   f"{p.name} trained at {p.rate_gbit_s:g} Gbit/s, below {top:g} Gbit/s of its peers",
                                   (f"{src}:{p.line}: {p.ca} port {p.port}: Rate {p.rate_gbit_s:g}",),
                                   "a port that links up at a lower speed reports no error: replace the cable or "
                                   "transceiver, then check the rate with ibstat"))
    if ports and not out:
        out.append(Finding("link", "ok", f"{len(ports)} IB port(s) up at their peers' rate"))
    return out + check_counters(inp) + check_pcie(inp)


def _port_fix(p: IbPort) -> str:
    """The fix for a port that is not Active. Physically up but logically Initializing/Armed on an InfiniBand
    link: the cable trained and the subnet manager has not activated the port (IBTA Architecture Spec. Vol. 1,
    ch. 14: the SM moves ports Init -> Armed -> Active); the real capture ibstat-cx4-initializing.txt shows it
    with Base lid 65535 and SM lid 0. Otherwise the physical link is the suspect."""
    if p.physical_state == "LinkUp" and p.state in ("Initializing", "Armed") and p.link_layer == "InfiniBand":
        return ("the link trained but no subnet manager activated the port: start one (opensm, or the switch's "
                "SM) on this fabric and check sminfo; the cable is not the suspect")
    return ("check the cable and the switch port (ibportstate, the switch's port log); reseat or replace the "
            "cable or transceiver")


def check_pcie(inp: Inputs) -> list[Finding]:
    """A NIC or GPU whose PCIe link trained below its capability: an error (it moves data at that fraction)."""
    out: list[Finding] = []
    for src, links in inp.pcie:
        for p in links:
            if p.downgraded:
                out.append(Finding("link", "error", f"PCIe {p.address} ({p.name}) trained at {p.sta_gt_s:g} GT/s "
                                   f"x{p.sta_width}, capable of {p.cap_gt_s:g} GT/s x{p.cap_width} "
                                   f"({100 * p.fraction:.0f}% of its bandwidth)",
                                   (f"{src}:{p.line}: LnkSta {p.sta_gt_s:g}GT/s x{p.sta_width} (LnkCap "
                                    f"{p.cap_gt_s:g}GT/s x{p.cap_width})",),
                                   "reseat the card or riser, check the slot's BIOS link settings; a NIC behind a "
                                   "narrowed link cannot feed its port"))
        if links and not any(p.downgraded for p in links):
            out.append(Finding("link", "ok", f"{len(links)} PCIe NIC/GPU link(s) at their capability ({src})"))
    return out


def check_counters(inp: Inputs) -> list[Finding]:
    """Link error counters (perfquery, ethtool -S): a link that went down is an error, other faults (symbol,
    CRC, receive errors) a warning: a cable degrading before it drops."""
    out: list[Finding] = []
    for src, c in inp.counters:
        errs = c.errors()
        if not errs:
            out.append(Finding("link", "ok", f"{c.device}: no error counter above 0 ({c.tool})"))
            continue
        down = c.link_downs()
        ev = tuple(f"{src}:{c.lines[k]}: {k} {v}" for k, v in errs.items())
        out.append(Finding("link", "error" if down else "warning",
                           f"{c.device}: {', '.join(errs)} above 0" + (" (the link went down)" if down else ""), ev,
                           "take a second snapshot: a rising count is a cable or transceiver to replace; reset the "
                           "counters after the fix (perfquery -x -R)"))
    return out


def check_gpus(inp: Inputs) -> list[Finding]:
    """NVML slowdown bits: hardware slowdowns (thermal, power brake) are errors, software caps warnings."""
    out: list[Finding] = []
    n = 0
    for src, gpus in inp.gpus:
        for g in gpus:
            n += 1
            out += _memory(src, g)
            reasons = g.throttle_reasons
            if not reasons:
                continue
            hw = any(r.startswith("hw_") for r in reasons)
            clock = f", SM {g.sm_clock_mhz:g} of {g.max_sm_clock_mhz:g} MHz" \
                if g.sm_clock_mhz is not None and g.max_sm_clock_mhz is not None else ""
            temp = f", {g.temperature_c:g} C" if g.temperature_c is not None else ""
            out.append(Finding("gpu", "error" if hw else "warning",
                               f"GPU {g.index} ({g.bus_id or g.name}) slowed down: {', '.join(reasons)}",
                               (f"{_where(src, g)}: throttle mask {g.throttle_mask:#x}{clock}{temp}",),
                               "hardware slowdowns: check cooling, fans and the node's power supply; "
                               "a software power cap: check `nvidia-smi -q -d POWER` limits"))
    if n and not out:
        out.append(Finding("gpu", "ok", f"{n} GPU(s) without clock slowdowns or memory errors"))
    return out


def _where(src: str, g: GpuState) -> str:
    """``file:line`` of a CSV row; ``file: GPU k`` for XML, which has no line per GPU."""
    return f"{src}:{g.line}" if g.line else f"{src}: GPU {g.index}"


def _memory(src: str, g: GpuState) -> list[Finding]:
    """Uncorrectable ECC errors and row remapping (pending: reset the GPU; failure: replace it)."""
    bad = [w for w, on in (("uncorrectable ECC errors", bool(g.ecc_uncorrectable)),
                           ("a row remap pending", g.remap_pending), ("row remapping failed", g.remap_failure)) if on]
    if not bad:
        return []
    return [Finding("gpu", "error", f"GPU {g.index} ({g.bus_id or g.name}) memory: {', '.join(bad)}",
                    (f"{src}: GPU {g.index}: dram_uncorrectable {g.ecc_uncorrectable}, remapped_row_pending "
                     f"{'Yes' if g.remap_pending else 'No'}, remapped_row_failure "
                     f"{'Yes' if g.remap_failure else 'No'}",),
                    "drain the node; reset the GPU for a pending remap, replace it when remapping failed")]


def _versions(inp: Inputs) -> dict[str, list[tuple[str, str]]]:
    """key -> [(where, value)] for every version the inputs state."""
    seen: dict[str, list[tuple[str, str]]] = {}

    def add(key: str, where: str, value: object) -> None:
        if value:
            seen.setdefault(key, []).append((where, str(value)))

    for src, gpus in inp.gpus:
        for g in gpus:
            add("GPU driver", _where(src, g), g.driver_version)
    for src, ports in inp.ibstat:
        for p in ports:
            add(f"NIC firmware ({p.ca_type or 'unknown type'})", f"{src}: {p.ca}", p.firmware)
    for src, d in inp.drivers:
        add(f"NIC driver ({d.driver})", f"{src}:{d.version_line}", d.version)
        add(f"NIC firmware ({d.driver})", f"{src}:{d.line}", d.firmware)
    for src, log in inp.logs:
        for lineno, _ in log.evidence.get("version", [])[:1]:
            add("NCCL", f"{src}:{lineno}", log.nccl_version)
    for src, rec in inp.records:
        for key, value in rec.env.versions().items():
            add({"driver": "GPU driver"}.get(key, key), src, value)
    return seen


def check_versions(inp: Inputs) -> list[Finding]:
    """A key with more than one value across the inputs is a warning, listing where each value was seen."""
    out: list[Finding] = []
    seen = _versions(inp)
    for key, pairs in seen.items():
        values = sorted({v for _, v in pairs})
        if len(values) > 1:
            evidence = tuple(f"{w}: {v}" for v in values for w in [next(w for w, x in pairs if x == v)])
            out.append(Finding("versions", "warning", f"{key} differs: {', '.join(values)}", evidence,
                               f"install one {key} version everywhere (a mismatch runs, slower or less "
                               "reliably, with no error)"))
    if seen and not out:
        out.append(Finding("versions", "ok", "one version each of " + ", ".join(sorted(seen))))
    return out


def check_affinity(inp: Inputs) -> list[Finding]:
    """GPUs whose nearest NIC is farther than a PCIe switch (PHB, NODE, SYS): no GPUDirect RDMA by NCCL's
    default, their network traffic staged through host memory, possibly across the CPU interconnect."""
    out: list[Finding] = []
    for src, gpus in inp.topo:
        far = [g for g in gpus if not g.gdr]
        if far:
            out.append(Finding("affinity", "warning",
                               f"{len(far)} of {len(gpus)} GPUs have no NIC within a PCIe switch "
                               f"({', '.join(f'{g.gpu}: {g.path}' for g in far)})",
                               tuple(f"{src}:{g.line}: {g.gpu} nearest NIC {g.nic} via {g.path} (NUMA {g.numa})"
                                     for g in far),
                               "bind each rank to the GPU and NIC of one PCIe switch (NCCL_IB_HCA, the launcher's "
                               f"CPU/NUMA binding); GPUDirect RDMA needs {' or '.join(GDR_PATHS)}"))
        elif gpus:
            out.append(Finding("affinity", "ok", f"every GPU has a NIC within a PCIe switch ({src})"))
    return out


def _quote(src: str, log: NcclLog, *kinds: str) -> tuple[str, ...]:
    return tuple(f"{src}:{n}: {t}" for k in kinds for n, t in log.evidence.get(k, [])[:_EVIDENCE_LINES])


def check_transport(inp: Inputs) -> list[Finding]:
    """Sockets between nodes (error), IB without GPUDirect RDMA (warning), NCCL WARN lines (warning)."""
    out: list[Finding] = []
    for src, log in inp.logs:
        if log.socket_fallback:  # a per-node log shows one host: the NET/Socket connections are the evidence
            n = log.transports.get("NET/Socket", 0)
            between = f"{log.nodes} nodes" if log.nodes > 1 else "nodes"
            out.append(Finding("transport", "error",
                               f"NCCL uses TCP sockets between {between} (no InfiniBand/RoCE)"
                               + (f": {n} connection(s) via NET/Socket" if n else ""),
                               _quote(src, log, "no_ib", "network_socket", "socket_connection"),
                               "make the IB devices visible to NCCL: rdma-core/libibverbs in the container, "
                               "/dev/infiniband mounted, NCCL_IB_DISABLE unset, NCCL_IB_HCA naming real HCAs"))
        elif log.transports.get("NET/IB", 0) and not log.gdrdma:
            out.append(Finding("transport", "warning", "NCCL uses IB without GPUDirect RDMA (data staged in host "
                               "memory)", _quote(src, log, "network_ib"),
                               "load nvidia-peermem (or use DMA-BUF), check NCCL_NET_GDR_LEVEL and PCIe topology"))
        if log.warnings:
            out.append(Finding("transport", "warning", f"{len(log.warnings)} NCCL WARN line(s)",
                               _quote(src, log, "warning"), "read the warnings: NCCL continues after most of them"))
        if log.evidence.get("algo_forced"):
            out.append(Finding("transport", "warning", "NCCL's algorithm is forced by the environment",
                               _quote(src, log, "algo_forced"), "unset NCCL_ALGO unless a measurement shows it helps"))
    if inp.logs and not out:
        out.append(Finding("transport", "ok", f"{len(inp.logs)} NCCL log(s): no socket fall-back, no warning"))
    return out


Predictor = Callable[[str, float, int], float]  # (op, size_bytes, ranks) -> predicted busbw, GB/s


def check_collectives(inp: Inputs, predict_busbw: Predictor | None, tolerance: float) -> list[Finding]:
    """Per table: wrong results (error); the largest size's busbw against the model: below by more than
    ``tolerance`` a warning, below half an error."""
    out: list[Finding] = []
    for src, run in inp.tables:
        bad = [r for r in run.rows if r.wrong > 0]
        if bad:
            out.append(Finding("collective", "error", f"{run.op}: {len(bad)} size(s) with wrong results",
                               tuple(f"{src}:{r.line}: {r.size_bytes:.0f} B #wrong {r.wrong}" for r in bad[:4]),
                               "wrong results: a faulty GPU, NIC or memory; rerun per node to isolate it"))
        if predict_busbw is None:
            continue
        big = max(run.rows, key=lambda r: r.size_bytes)
        want = predict_busbw(run.op, big.size_bytes, run.ranks)
        ratio = big.busbw_gbyte_s / want if want > 0 else 1.0
        ev = (f"{src}:{big.line}: {run.op} {big.size_bytes:.0f} B x{run.ranks}: busbw {big.busbw_gbyte_s:g} GB/s "
              f"measured, {want:.3g} GB/s predicted ({100 * ratio:.0f}%)",)
        if ratio < 1 - tolerance:
            out.append(Finding("collective", "error" if ratio < 0.5 else "warning",
                               f"{run.op} busbw {100 * (1 - ratio):.0f}% below the model", ev,
                               "look lower: a slow link, the transport, versions; then NCCL_ALGO/channels"))
        elif ratio > 1 + tolerance:
            out.append(Finding("collective", "warning", f"{run.op} busbw {100 * (ratio - 1):.0f}% above the model",
                               ev, "the cluster file does not describe this machine: fix it (or calibrate)"))
        else:
            out.append(Finding("collective", "ok", f"{run.op} busbw within {100 * tolerance:.0f}% of the model", ev))
    return out
