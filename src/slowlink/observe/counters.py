"""Readers of link error counters: ``perfquery`` (InfiniBand PortCounters) and ``ethtool -S`` (NIC statistics).

``perfquery`` (infiniband-diags, man perfquery(8)) prints ``# Port counters: Lid L port P`` then one
``Name:....value`` line per counter of the IBTA PortCounters attribute (SymbolErrorCounter, LinkDownedCounter,
PortRcvErrors...). ``ethtool -S DEV`` prints ``NIC statistics:`` then ``name: value`` lines whose names are the
driver's (NVIDIA's "Understanding mlx5 ethtool counters": ``rx_crc_errors_phy``, ``rx_symbol_err_phy``,
``link_down_events_phy``, ``rx_discards_phy``...). Counters are cumulative since the last reset: a non-zero error
counter says errors happened, two snapshots say how fast.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from slowlink.errors import SpecError
from slowlink.observe.common import line_error

# perfquery counters that count link faults (IBTA PortCounters); LinkDowned is a link that went down.
IB_ERRORS = ("SymbolErrorCounter", "LinkErrorRecoveryCounter", "LinkDownedCounter", "PortRcvErrors",
             "PortRcvRemotePhysicalErrors", "LocalLinkIntegrityErrors", "ExcessiveBufferOverrunErrors",
             "PortXmitDiscards")
IB_DOWN = ("LinkDownedCounter",)
# ethtool -S names of physical-layer faults: CRC/FCS and symbol errors, link-down events, discards.
_ETH_ERROR = re.compile(r"(crc|fcs|symbol_err|link_down_events|discards_phy|_errors?$|_err_)", re.I)
_ETH_DOWN = re.compile(r"link_down_events", re.I)


@dataclass(frozen=True)
class Counters:
    """One snapshot: the device it names, every counter, and the line of each."""

    tool: str  # "perfquery" or "ethtool"
    device: str
    values: dict[str, int]
    lines: dict[str, int]

    def errors(self) -> dict[str, int]:
        """Non-zero fault counters."""
        if self.tool == "perfquery":
            return {k: v for k, v in self.values.items() if k in IB_ERRORS and v > 0}
        return {k: v for k, v in self.values.items() if _ETH_ERROR.search(k) and v > 0}

    def link_downs(self) -> dict[str, int]:
        """Non-zero counters of the link going down."""
        if self.tool == "perfquery":
            return {k: v for k, v in self.errors().items() if k in IB_DOWN}
        return {k: v for k, v in self.errors().items() if _ETH_DOWN.search(k)}


# "# Port counters: Lid 1 port 1" (perfquery) or "# Port extended counters: Lid 1719 port 1 (CapMask: ...)"
# (perfquery -x, 64-bit counters); several ports (-a, or a loop over ports) print one such block each.
_PQ_HEAD = re.compile(r"^# Port (?:extended )?counters: (.*)$")
_PQ_LINE = re.compile(r"^([A-Za-z0-9]+):\.*(\S+)$")


def parse_perfquery(text: str, source: str = "perfquery") -> tuple[Counters, ...]:
    """``perfquery`` output: one :class:`Counters` per ``# Port ... counters:`` block (one when it has none)."""
    blocks: list[tuple[str, dict[str, int], dict[str, int]]] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        s = raw.strip()
        if not s:
            continue
        if m := _PQ_HEAD.match(s):
            blocks.append((m.group(1).split(" (")[0], {}, {}))
        elif m := _PQ_LINE.match(s):
            if not blocks:
                blocks.append(("", {}, {}))
            _, values, lines = blocks[-1]
            try:
                values[m.group(1)] = int(m.group(2), 0)
            except ValueError:
                raise line_error(source, lineno, raw, f"counter {m.group(1)} ({m.group(2)!r}) must be an "
                                 "integer") from None
            lines[m.group(1)] = lineno
        else:
            raise line_error(source, lineno, raw, "is not perfquery output ('Name:....value')")
    if not blocks or not all(any(k in values for k in IB_ERRORS) for _, values, _ in blocks):
        raise SpecError(f"{source}: no PortCounters error counter (SymbolErrorCounter...) found in a port block: "
                        "not perfquery output")
    return tuple(Counters("perfquery", device or source, values, lines) for device, values, lines in blocks)


def parse_ethtool_stats(text: str, source: str = "ethtool") -> Counters:
    """``ethtool -S DEV`` output."""
    lines_ = text.splitlines()
    start = next((i for i, ln in enumerate(lines_) if ln.strip() == "NIC statistics:"), None)
    if start is None:
        raise SpecError(f"{source}: no 'NIC statistics:' header: not ethtool -S output")
    values, lines = {}, {}
    for lineno, raw in enumerate(lines_[start + 1:], start=start + 2):
        if not raw.strip():
            continue
        name, sep, value = raw.strip().rpartition(":")
        try:
            values[name.strip()] = int(value)
        except ValueError:
            raise line_error(source, lineno, raw, f"counter {name.strip() or '?'} ({value.strip()!r}) must be "
                             "an integer") from None
        if not sep:
            raise line_error(source, lineno, raw, "must be 'name: value'")
        lines[name.strip()] = lineno
    return Counters("ethtool", source, values, lines)
