"""Reader of ``lspci -vv``: each PCIe device's link capability (``LnkCap``) and the state it trained at
(``LnkSta``). A NIC or GPU whose link trained below its capability (fewer lanes, a lower generation: lspci marks
it ``(downgraded)`` since pciutils 3.6, and older ones show it only by the numbers) moves data at that fraction of
its bandwidth and reports no error: the PCIe form of a port trained slow (lspci(8); PCIe Base Specification,
Link Capabilities and Link Status registers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from slowlink.errors import SpecError

_DEVICE = re.compile(r"^([0-9a-fA-F]{2,4}:[0-9a-fA-F]{2}\.[0-7]|[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])"
                     r" (.+)$")
_LINK = re.compile(r"^(LnkCap|LnkSta):.*?Speed ([0-9.]+)GT/s.*?Width x(\d+)")
# Classes worth a finding: network and accelerators (a slow USB controller is nobody's problem here).
_CLASSES = ("Infiniband controller", "Ethernet controller", "Network controller", "3D controller",
            "VGA compatible controller", "Processing accelerators")


@dataclass(frozen=True)
class PcieLink:
    """One device's capability and trained state: GT/s per lane and lanes."""

    address: str
    name: str
    cap_gt_s: float
    cap_width: int
    sta_gt_s: float
    sta_width: int
    line: int  # the LnkSta line

    @property
    def downgraded(self) -> bool:
        return self.sta_gt_s < self.cap_gt_s or self.sta_width < self.cap_width

    @property
    def fraction(self) -> float:
        """Trained bandwidth / capable bandwidth, as per-lane rate x lanes (from 8 GT/s up every generation uses
        128b/130b; below, 8b/10b costs another 20%, not counted here)."""
        return (self.sta_gt_s * self.sta_width) / (self.cap_gt_s * self.cap_width)


def parse_lspci(text: str, source: str = "lspci -vv") -> tuple[PcieLink, ...]:
    """Network and accelerator devices with both LnkCap and LnkSta (others are skipped)."""
    out: list[PcieLink] = []
    dev: tuple[str, str] | None = None
    cap: tuple[float, int] | None = None
    seen = False
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if m := _DEVICE.match(raw):
            seen = True
            dev, cap = (m.group(1), m.group(2)), None
            continue
        m = _LINK.match(raw.strip())
        if m is None or dev is None or not any(c in dev[1] for c in _CLASSES):
            continue
        speed, width = float(m.group(2)), int(m.group(3))
        if m.group(1) == "LnkCap":
            cap = (speed, width)
        elif cap is not None:
            out.append(PcieLink(dev[0], dev[1], cap[0], cap[1], speed, width, lineno))
    if not seen:
        raise SpecError(f"{source}: no PCI device line ('BB:DD.F Class: Name'): not lspci output")
    return tuple(out)
