"""Reader of ``nvidia-smi topo -m``: how each GPU reaches each NIC (the seed's GPU-NIC affinity layer).

The matrix is tab-separated: a header of device names (``GPU0``..., ``NIC0``... or, in older drivers, the NIC's
own name such as ``mlx5_0``) then ``CPU Affinity`` and ``NUMA Affinity``; one row per device; a ``NIC Legend``
maps ``NICk`` to the HCA. Path types, nearest first (the command's own legend): ``PIX`` (one PCIe bridge),
``PXB`` (several bridges, no host bridge), ``PHB`` (through the CPU's host bridge), ``NODE`` (across host bridges
of one NUMA node), ``SYS`` (across the SMP interconnect between NUMA nodes). NCCL uses GPUDirect RDMA by default
only when the NIC is close to the GPU (NCCL env docs, NCCL_NET_GDR_LEVEL: PIX/PXB), so a GPU whose nearest NIC
is PHB, NODE or SYS stages its network traffic through host memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from slowlink.errors import SpecError
from slowlink.observe.common import line_error

PATHS = ("PIX", "PXB", "PHB", "NODE", "SYS")  # nearest first
GDR_PATHS = ("PIX", "PXB")
_LEGEND = re.compile(r"^(NIC\d+):\s*(\S+)$")


@dataclass(frozen=True)
class GpuNics:
    """One GPU: its nearest NIC, the path type to it, its NUMA node (None when not shown) and its line."""

    gpu: str
    nic: str
    path: str
    numa: str | None
    line: int

    @property
    def gdr(self) -> bool:
        return self.path in GDR_PATHS


# Recent drivers underline the header on a terminal with ANSI SGR codes (ESC[4m ... ESC[0m); a capture of that
# output keeps them (real capture nvidia-smi-topo-m-h100-vm-ansi.txt, driver 590.48.01).
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def topo_columns(text: str, source: str = "nvidia-smi topo -m") -> tuple[int, list[str]]:
    """The matrix header: its index in ``text.splitlines()`` and its column names (the leading empty cell out).
    The header is the first tab-separated line with the cells GPU0 and CPU Affinity (a row names GPU0 too)."""
    cells = [[c.strip() for c in _ANSI.sub("", ln).split("\t")] for ln in text.splitlines()]
    head = next((i for i, c in enumerate(cells) if "GPU0" in c and "CPU Affinity" in c), None)
    if head is None:
        raise SpecError(f"{source}: no matrix header (a tab-separated line naming GPU0 and CPU Affinity): "
                        "not nvidia-smi topo -m")
    return head, cells[head][1:] if cells[head][0] == "" else cells[head]


def parse_topo(text: str, source: str = "nvidia-smi topo -m") -> tuple[GpuNics, ...]:
    """Each GPU's nearest NIC (an empty tuple when the machine has no NIC in the matrix)."""
    head, cols = topo_columns(text, source)
    lines = [_ANSI.sub("", ln) for ln in text.splitlines()]
    legend = {m.group(1): m.group(2) for ln in lines if (m := _LEGEND.match(ln.strip()))}
    nics = [i for i, c in enumerate(cols) if c.startswith("NIC") or c.startswith("mlx") or c.startswith("ib")]
    numa_col = cols.index("NUMA Affinity") if "NUMA Affinity" in cols else None
    out = []
    for lineno, raw in enumerate(lines[head + 1:], start=head + 2):
        cells = [c.strip() for c in raw.split("\t")]
        if not cells[0].startswith("GPU"):
            continue
        vals = cells[1:]
        if nics and len(vals) <= max(nics):
            raise line_error(source, lineno, raw, f"has {len(vals)} columns, the header has {len(cols)}: truncated")
        paths = [(PATHS.index(vals[i]), cols[i]) for i in nics if vals[i] in PATHS]
        if nics and not paths:
            raise line_error(source, lineno, raw, f"names no path type ({', '.join(PATHS)}) to any NIC")
        if not paths:
            continue
        rank, nic = min(paths)
        numa = vals[numa_col] if numa_col is not None and numa_col < len(vals) and vals[numa_col] else None
        out.append(GpuNics(cells[0], legend.get(nic, nic), PATHS[rank], numa, lineno))
    return tuple(out)
