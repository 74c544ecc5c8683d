"""Reader of nccl-tests' stdout (``all_reduce_perf``, ``all_gather_perf``...) into slowlink's collectives record.

The table's layout is nccl-tests' ``print_header``/``PrintRow`` (src/common.cu, github.com/NVIDIA/nccl-tests)
and its meaning doc/PERFORMANCE.md there: per size, an out-of-place and an in-place group of
``time algbw busbw #wrong``; time in microseconds (the unit line says ``(us)``), bandwidths in GB/s (1e9 B/s),
``size`` in bytes. Two header generations are read:

- since nccl-tests 2.10: ``size count type redop root time algbw busbw #wrong time algbw busbw #wrong``;
  ``#wrong`` is a count of wrong elements, ``N/A`` where not checked;
- older: no ``root`` column, and ``error`` (the largest absolute error, a float) instead of ``#wrong``.

The op is not in the table: it comes from ``--op``, else from a ``<op>_perf`` binary named in the text (a
command line logged with it, or nccl-tests 2.17's ``# Collective test starting: all_reduce_perf``) or in the file
name; binaries built with ``MPI=1 NAME_SUFFIX=_mpi`` are named ``<op>_perf_mpi`` (nccl-tests README.md, "Build").
The ranks are the ``#  Rank N ... on HOST device D`` lines. Lines tagged by ``mpirun --tag-output``
(``[1,0]<stdout>:``) are read without their tag (:mod:`slowlink.logtags`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slowlink.collectives.ops import OPS
from slowlink.errors import SpecError, line_error
from slowlink.fileio import read_text
from slowlink.logtags import strip_launcher_tag

# nccl-tests binary stem -> slowlink op (binaries: the Makefile's list in src/Makefile of nccl-tests).
BINARIES: dict[str, str] = {
    "all_reduce": "all_reduce", "all_gather": "all_gather", "reduce_scatter": "reduce_scatter",
    "broadcast": "broadcast", "reduce": "reduce", "alltoall": "all_to_all", "sendrecv": "send_recv",
}
REDUCING = ("all_reduce", "reduce_scatter", "reduce")
_PERF = re.compile(r"\b(all_reduce|all_gather|reduce_scatter|broadcast|reduce|alltoall|sendrecv|scatter|gather|"
                   r"hypercube)_perf(?:_mpi)?\b")
_RANK = re.compile(r"^#\s*Rank\s+(\d+)(?:\s+Group\s+\d+)?\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+"
                   r"\[([^\]]*)\]\s*(.*)$")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
_TIME_UNITS = {"(us)": 1e-6, "(ms)": 1e-3}
_HALF = ("time", "algbw", "busbw")


@dataclass(frozen=True)
class NcclTestsRow:
    """One line of the table: both halves, in SI units (time_s) and GB/s."""

    size_bytes: float
    count: int
    type: str
    redop: str
    root: int
    time_s: float
    algbw_gbyte_s: float
    busbw_gbyte_s: float
    wrong: int
    in_place: dict[str, float | int] | None
    line: int


@dataclass(frozen=True)
class NcclTestsRun:
    """A whole nccl-tests output: op, ranks and their hosts/devices, rows, and the printed average busbw."""

    op: str
    ranks: int
    hostnames: tuple[str, ...]
    devices: tuple[str, ...]
    rows: tuple[NcclTestsRow, ...]
    avg_busbw_gbyte_s: float | None
    generation: str  # "2.10+" (redop, root, #wrong) or "legacy" (error column)
    params: dict[str, str] = field(default_factory=dict)

    @property
    def nodes(self) -> int:
        return len(set(self.hostnames)) or 1


def op_from(text: str, source: str, op: str | None) -> str:
    """The op: given, else the ``<op>_perf`` binary named in the text or in the file name."""
    if op is not None:
        if op not in OPS:
            raise SpecError(f"--op ({op!r}) must be one of {', '.join(OPS)}")
        return op
    for where in (text, Path(source).name):
        m = _PERF.search(where)
        if m:
            if m.group(1) not in BINARIES:
                raise SpecError(f"{source}: {m.group(1)}_perf ({m.group(0)!r}) has no slowlink op: "
                                f"use one of {', '.join(f'{b}_perf' for b in BINARIES)}")
            return BINARIES[m.group(1)]
    raise SpecError(f"{source}: op (None) is not named: no '<op>_perf' in the text or file name; "
                    f"give --op ({', '.join(OPS)})")


def _columns(line: str) -> list[str]:
    return line.lstrip("#").split()


def _is_header(line: str) -> bool:
    cols = _columns(line)
    return line.startswith("#") and cols[:2] == ["size", "count"] and "busbw" in cols


def _number(tok: str, kind: type, source: str, lineno: int, line: str, name: str) -> Any:
    try:
        return kind(tok)
    except ValueError:
        raise line_error(source, lineno, line, f"column {name} ({tok!r}) must be a number") from None


def _wrong(tok: str, legacy: bool, source: str, lineno: int, line: str) -> int:
    """#wrong as a count (N/A: -1). A legacy ``error`` column is a float error, not a count: -1 (not counted);
    both print ``N/A`` when the run did not check results (``-c 0``)."""
    if tok == "N/A":
        return -1
    if legacy:
        _number(tok, float, source, lineno, line, "error")
        return -1
    return int(_number(tok, int, source, lineno, line, "#wrong"))


def _row(cols: list[str], toks: list[str], time_unit: float, source: str, lineno: int, line: str,
         op: str) -> NcclTestsRow | None:
    """One row, or None for a size-0 row: nccl-tests prints ``0  0  float`` rows when the smallest size is below
    one element (``-b 1``), a launch without data that has no bandwidth (real capture:
    all_reduce_perf-2.12-efa-2x1-t4-mpirun.txt)."""
    if len(toks) != len(cols):
        raise line_error(source, lineno, line, f"has {len(toks)} columns, the header has {len(cols)} "
                         f"({' '.join(cols)}): a truncated or garbled row")
    legacy = "#wrong" not in cols
    first = {c: toks[i] for i, c in enumerate(cols) if c not in cols[:i]}
    halves = []
    for start in [i for i, c in enumerate(cols) if c == "time"]:
        vals = [_number(toks[start + j], float, source, lineno, line, name) for j, name in enumerate(_HALF)]
        if vals[0] <= 0:
            raise line_error(source, lineno, line, f"column time ({toks[start]!r}) must be > 0")
        halves.append({"time_s": vals[0] * time_unit, "algbw_gbyte_s": vals[1], "busbw_gbyte_s": vals[2],
                       "wrong": _wrong(toks[start + 3], legacy, source, lineno, line)})
    size = _number(first["size"], int, source, lineno, line, "size")
    if size < 0:
        raise line_error(source, lineno, line, f"column size ({size}) must be >= 0")
    if size == 0:
        return None
    return NcclTestsRow(
        size_bytes=float(size), count=_number(first["count"], int, source, lineno, line, "count"),
        type=first["type"], redop=first.get("redop", "sum") if op in REDUCING else "none",
        root=int(_number(first.get("root", "-1"), int, source, lineno, line, "root")),
        time_s=float(halves[0]["time_s"]), algbw_gbyte_s=float(halves[0]["algbw_gbyte_s"]),
        busbw_gbyte_s=float(halves[0]["busbw_gbyte_s"]), wrong=int(halves[0]["wrong"]),
        in_place=halves[1] if len(halves) > 1 else None, line=lineno)


def _params(line: str) -> dict[str, str]:
    """``# nThread 1 nGpus 1 minBytes 8 ...``: the leading name/value pairs nccl-tests prints first."""
    toks = line.lstrip("#").split()
    return {toks[i]: toks[i + 1] for i in range(0, len(toks) - 1, 2) if not toks[i].endswith(":")}


def parse_nccl_tests(text: str, source: str = "nccl-tests", op: str | None = None,
                     ranks: int | None = None) -> NcclTestsRun:
    """Parse one nccl-tests output. Lines that are neither the table nor its comments (interleaved NCCL INFO
    logs, mpirun chatter) are skipped; a line that starts like a row (a number) but is not one is an error."""
    the_op = op_from(text, source, op)
    cols: list[str] | None = None
    time_unit = 1e-6
    rows: list[NcclTestsRow] = []
    hosts: dict[int, tuple[str, str]] = {}
    avg: float | None = None
    params: dict[str, str] = {}
    lines = [strip_launcher_tag(raw) for raw in text.splitlines()]
    for lineno, line in enumerate(lines, start=1):
        s = line.strip()
        if m := _RANK.match(s):
            hosts[int(m.group(1))] = (m.group(2), m.group(5).strip())
        elif s.startswith("# nThread"):
            params = _params(s)
        elif _is_header(s):
            cols = _columns(s)
            unit_line = lines[lineno] if lineno < len(lines) else ""
            time_unit = next((f for u, f in _TIME_UNITS.items() if u in unit_line), 1e-6)
        elif m := _AVG.match(s):
            avg = float(m.group(1))
        elif (s[:1].isdigit() and cols is not None and not _looks_like_log(s)
              and (row := _row(cols, s.split(), time_unit, source, lineno, line, the_op)) is not None):
            rows.append(row)
    if cols is None:
        raise SpecError(f"{source}: no nccl-tests table (a '#  size  count  type ... busbw' header) was found")
    if not rows:
        raise SpecError(f"{source}: the nccl-tests table has no rows (a run that failed before its first size?)")
    n = ranks if ranks is not None else len(hosts)
    if n < 1:
        raise SpecError(f"{source}: ranks (0) unknown: no '#  Rank N ... on HOST device D' lines; give --ranks")
    names = [hosts[r] for r in sorted(hosts)]
    return NcclTestsRun(op=the_op, ranks=n, hostnames=tuple(h for h, _ in names),
                        devices=tuple(d for _, d in names), rows=tuple(rows), avg_busbw_gbyte_s=avg,
                        generation="2.10+" if "#wrong" in cols else "legacy", params=params)


def _looks_like_log(s: str) -> bool:
    """A line of another tool that happens to start with a digit (an NCCL log line ``host:pid:tid [d] NCCL ...``)."""
    return " NCCL " in s or ":" in s.split()[0]


def load_nccl_tests(path: Path | str, op: str | None = None, ranks: int | None = None) -> NcclTestsRun:
    """Read and parse an nccl-tests output file."""
    return parse_nccl_tests(read_text(path, "nccl-tests output"), str(path), op, ranks)


def looks_like_nccl_tests(text: str) -> bool:
    """Whether ``text`` holds an nccl-tests table header (``load_record`` accepts such files)."""
    return any(_is_header(strip_launcher_tag(line).strip()) for line in text.splitlines())


__all__ = ["BINARIES", "NcclTestsRow", "NcclTestsRun", "load_nccl_tests", "looks_like_nccl_tests",
           "parse_nccl_tests"]
