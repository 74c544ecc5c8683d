"""Physical bounds on the rates, sizes and counts a user gives: a value outside is a typo or a unit slip (Mbit/s
for Gbit/s, bytes for GB), never a cluster, and a model fed one answers with a 300-digit step time.

Each bound is one entry here, with the reason it stands where it does; a spec field takes it as its type
(``speed_gbit_s: LinkGbitS``), a command-line value through :meth:`Bound.check`. The limits are wide on
purpose: 10x to 100x beyond the largest part or run published, so that no real design is refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator


@dataclass(frozen=True)
class Bound:
    """``lo <= value <= hi`` in ``unit``; ``why`` is the reason, shown in the refusal."""

    lo: float
    hi: float
    unit: str
    why: str

    def rule(self) -> str:
        return f"must be between {_num(self.lo)} and {_num(self.hi)}{self.unit}: {self.why}"

    def check(self, value: float, name: str | None = None) -> float:
        """``value`` when inside the bound; a ValueError naming the rule (and ``name``, when given) otherwise."""
        if not (math.isfinite(value) and self.lo <= value <= self.hi):
            raise ValueError(self.rule() if name is None else f"{name} ({value:g}) {self.rule()}")
        return value

    def typed(self, kind: type[Any] = float) -> Any:
        """The pydantic field type that enforces this bound (after the field's own type and ``gt``/``ge``)."""
        return Annotated[kind, AfterValidator(lambda v: v if v is None else self.check(v))]


def _num(x: float) -> str:
    """1000000 -> 1,000,000; 0.001 -> 0.001; 1e16 -> 1e+16."""
    return f"{int(x):,}" if x == int(x) and abs(x) < 1e9 else f"{x:g}"


# A NIC or scale-out port: today's fastest is 800 Gbit/s (ConnectX-8, Quantum-X800, 2024-25); 100 Tbit/s leaves
# two orders of magnitude. 1 Mbit/s is below any Ethernet still sold.
LINK_GBIT_S = Bound(1e-3, 1e5, " Gbit/s", "1 Mbit/s to 100 Tbit/s (the fastest NIC port today is 800 Gbit/s)")
# A GPU's scale-up bandwidth per direction: NVLink 5 is 900 GB/s (B200 datasheet); 10 TB/s leaves 10x.
SCALE_UP_GBYTE_S = Bound(1e-3, 1e4, " GB/s", "1 MB/s to 10 TB/s per GPU and direction (NVLink 5: 900 GB/s)")
# A shared file system's aggregate bandwidth: the largest read at ~10 TB/s (OLCF Orion, 2023); 1 PB/s leaves 100x.
STORAGE_GBYTE_S = Bound(1e-3, 1e6, " GB/s", "1 MB/s to 1 PB/s (the largest parallel file systems read ~10 TB/s)")
METADATA_OPS_S = Bound(1.0, 1e10, " ops/s", "1 to 10 billion metadata operations a second")
# Servers: the largest clusters announced hold ~100k-200k GPUs (~25k 8-GPU servers); a million leaves 40x.
NODES = Bound(1, 1_000_000, "", "a cluster of 1 to 1,000,000 servers")
# GPUs in one server (or rack-scale node): NVL72 is 72, NVL576 (announced) 576.
GPUS_PER_NODE = Bound(1, 1024, "", "1 to 1,024 GPUs in one node (a rack-scale NVL576 holds 576)")
NICS_PER_NODE = Bound(0, 64, "", "0 to 64 NICs of one role in a node (an HGX server has 8 compute NICs)")
# Switch ASICs: 64 ports of 800G (Quantum-X800) to 512 of 200G (Tomahawk 6, 2025).
SWITCH_RADIX = Bound(4, 2048, " ports", "4 to 2,048 ports per switch (the largest ASICs have 512)")
# Cut-through switches forward in 0.1-1 us; store-and-forward of a jumbo frame at 1 Gbit/s is ~72 us.
SWITCH_LATENCY_US = Bound(0.0, 1e4, " us", "0 to 10 ms per switch (cut-through switches take 0.1-1 us)")
# A token budget: the largest published pre-training runs are ~30-40T tokens (Llama 4, Meta 2025); 1e16 leaves
# ~300x.
TOKENS = Bound(1.0, 1e16, " tokens", "1 to 1e16 tokens (the largest published runs train ~30T)")
STEPS = Bound(1, 1e10, " steps", "1 to 1e10 training steps")
# One collective's buffer: the largest GPU holds 288 GB (B300); 1 TB leaves ~3x.
COLLECTIVE_BYTES = Bound(1.0, 1e12, " B", "1 B to 1 TB per rank (the largest GPU holds 288 GB)")

LinkGbitS = LINK_GBIT_S.typed()
ScaleUpGbyteS = SCALE_UP_GBYTE_S.typed()
StorageGbyteS = STORAGE_GBYTE_S.typed()
MetadataOpsS = METADATA_OPS_S.typed()
Nodes = NODES.typed(int)
GpusPerNode = GPUS_PER_NODE.typed(int)
NicsPerNode = NICS_PER_NODE.typed(int)
SwitchRadix = SWITCH_RADIX.typed(int)
SwitchLatencyUs = SWITCH_LATENCY_US.typed()

# A long-haul round trip: light in fibre covers ~200 km per ms one way, so halfway round the Earth (20,000 km) is
# ~200 ms round trip; a geostationary satellite hop is ~600 ms. 2 s leaves 3x past the satellite.
RTT_MS = Bound(0.0, 2000.0, " ms", "0 to 2,000 ms round trip (halfway round the Earth in fibre is ~200 ms, a "
               "geostationary satellite hop ~600 ms)")
# A TCP window: RFC 7323's window scaling (shift <= 14) caps it at 2^30 bytes, 1 GiB.
WINDOW_MIB = Bound(1.0 / 1024, 1024.0, " MiB", "1 KiB to 1 GiB (RFC 7323 window scaling caps a TCP window at "
                   "2^30 bytes)")
# Links between two sites: a DWDM fibre pair carries ~64-96 coherent 400G-800G waves; 10,000 leaves 100x.
DCI_LINKS = Bound(1, 10_000, " links", "1 to 10,000 links between sites (one DWDM fibre pair carries ~100 waves)")
# A segment's payload: 64 B to a 9,000 B jumbo frame's (RoCE's largest MTU is 4,096 B).
SEGMENT_BYTES = Bound(64, 9000, " B", "64 to 9,000 bytes per segment (a jumbo frame carries ~9,000)")

RttMs = RTT_MS.typed()
WindowMib = WINDOW_MIB.typed()
DciLinks = DCI_LINKS.typed(int)
SegmentBytes = SEGMENT_BYTES.typed(int)
