"""Reader of ``nvidia-smi -q -x`` (XML, nvidia-smi(1), DTD ``nvsmi_device_vNN.dtd``): per ``<gpu>`` the product,
bus id, temperature, SM clock and its maximum, power draw, the clock slowdown reasons (``clocks_event_reasons``
since driver 535, ``clocks_throttle_reasons`` before: one element per NVML reason, ``Active``/``Not Active``),
volatile uncorrectable DRAM ECC errors and row remapping (``remapped_row_pending``: a reset is needed;
``remapped_row_failure``: the GPU is out of spare rows). Read into :class:`GpuState` like the CSV query."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from slowlink.errors import SpecError
from slowlink.observe.hardware import THROTTLE_BITS, GpuState


def _num(el: ET.Element | None) -> float | None:
    if el is None or el.text is None:
        return None
    try:
        return float(el.text.split()[0])
    except (ValueError, IndexError):
        return None


def _mask(gpu: ET.Element) -> int | None:
    """NVML's bit mask from the per-reason elements (``..._hw_thermal_slowdown`` -> 0x40)."""
    block = gpu.find("clocks_event_reasons")
    if block is None:
        block = gpu.find("clocks_throttle_reasons")
    if block is None:
        return None
    mask = 0
    for el in block:
        for bit, (name, _bad) in THROTTLE_BITS.items():
            if el.tag.endswith(name) and (el.text or "").strip() == "Active":
                mask |= bit
    return mask


def parse_nvidia_smi_xml(text: str, source: str = "nvidia-smi -q -x") -> tuple[GpuState, ...]:
    """Every ``<gpu>`` of the log; the line of a GPU is unknown in XML (0)."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        line, col = exc.position
        raise SpecError(f"{source}:{line}: (column {col}) is not well-formed XML: {exc.msg}") from None
    if root.tag != "nvidia_smi_log":
        raise SpecError(f"{source}: root element ({root.tag!r}) must be nvidia_smi_log: not nvidia-smi -q -x")
    driver = root.findtext("driver_version")
    gpus = []
    for i, gpu in enumerate(root.findall("gpu")):
        minor = gpu.findtext("minor_number")
        ecc = _num(gpu.find("ecc_errors/volatile/dram_uncorrectable"))
        gpus.append(GpuState(
            index=int(minor) if minor and minor.isdigit() else i, name=gpu.findtext("product_name") or "unknown",
            driver_version=driver, bus_id=gpu.findtext("pci/pci_bus_id") or gpu.get("id"),
            temperature_c=_num(gpu.find("temperature/gpu_temp")), sm_clock_mhz=_num(gpu.find("clocks/sm_clock")),
            max_sm_clock_mhz=_num(gpu.find("max_clocks/sm_clock")),
            power_w=_num(gpu.find("gpu_power_readings/power_draw")) or _num(gpu.find("power_readings/power_draw")),
            throttle_mask=_mask(gpu), line=0,
            ecc_uncorrectable=int(ecc) if ecc is not None else None,
            remap_pending=gpu.findtext("remapped_rows/remapped_row_pending") == "Yes",
            remap_failure=gpu.findtext("remapped_rows/remapped_row_failure") == "Yes"))
    if not gpus:
        raise SpecError(f"{source}: no <gpu> element: nvidia-smi found no GPU")
    return tuple(gpus)
