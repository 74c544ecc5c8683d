"""``slowlink doctor``: read every file it is given (by content: nccl-tests output, NCCL logs, ibstat,
nvidia-smi CSV, slowlink records), run the checks of :mod:`slowlink.observe.checks` bottom-up and grade them.

Exit code by the worst finding (the issue's contract): 0 clean, 1 warnings, 3 errors.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from slowlink import units
from slowlink.bench.nccl_tests import parse_nccl_tests
from slowlink.bench.record import Record, check_record, load_record, nccl_tests_record
from slowlink.errors import SpecError
from slowlink.observe.checks import (
    LAYERS,
    Finding,
    Inputs,
    Predictor,
    check_affinity,
    check_collectives,
    check_gpus,
    check_links,
    check_transport,
    check_versions,
)
from slowlink.observe.common import read_input, sniff
from slowlink.observe.counters import parse_ethtool_stats, parse_perfquery
from slowlink.observe.hardware import parse_ethtool_info, parse_ibstat, parse_ibv_devinfo, parse_nvidia_smi_csv
from slowlink.observe.nccl_log import parse_nccl_log
from slowlink.observe.nvsmi_xml import parse_nvidia_smi_xml
from slowlink.observe.pcie import parse_lspci
from slowlink.observe.topo import parse_topo

EXIT_CODES = {"ok": 0, "warning": 1, "error": 3}
DEFAULT_TOLERANCE = 0.20  # busbw below the model by more than this is flagged: the model's own error on
# published points is within ~10-15% (docs/collectives.md), so 20% leaves room for it; a choice, not a fit.


@dataclass(frozen=True)
class Diagnosis:
    """The findings, bottom-up, and the exit code they earn."""

    findings: tuple[Finding, ...]

    @property
    def worst(self) -> str:
        sev = [f.severity for f in self.findings]
        return "error" if "error" in sev else "warning" if "warning" in sev else "ok"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.worst]

    def to_json(self) -> dict[str, Any]:
        return {"findings": [f.to_json() for f in self.findings], "worst": self.worst, "exit_code": self.exit_code}


def _json_record(text: str, src: str) -> Record | None:
    """A slowlink record (JSON), or None when ``text`` is not JSON (a log line may start with ``[0]``)."""
    if not text.lstrip().startswith(("{", "[")):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return check_record(data, src)


# format (common.sniff) -> (the Inputs field it fills, its parser)
_PARSERS: dict[str, tuple[str, Callable[[str, str], Any]]] = {
    "nccl-log": ("logs", parse_nccl_log),
    "ethtool": ("counters", parse_ethtool_stats), "lspci": ("pcie", parse_lspci),
    "ethtool-i": ("drivers", parse_ethtool_info), "nvidia-smi-topo": ("topo", parse_topo),
    "ibstat": ("ibstat", parse_ibstat), "ibv_devinfo": ("ibstat", parse_ibv_devinfo),
    "nvidia-smi": ("gpus", parse_nvidia_smi_csv), "nvidia-smi-xml": ("gpus", parse_nvidia_smi_xml),
}


def read_inputs(paths: list[Path]) -> Inputs:
    """Each file read by its content; a file of no known format is a :class:`SpecError` naming it."""
    acc: dict[str, list[Any]] = {f.name: [] for f in fields(Inputs)}
    for path in paths:
        src = str(path)
        text = read_input(path, "doctor input")
        rec = _json_record(text, src)
        kind = "record" if rec is not None else sniff(text)
        if rec is not None:
            acc["records"].append((src, rec))
        elif kind == "nccl-tests":
            run = parse_nccl_tests(text, src)
            acc["tables"].append((src, run))
            acc["records"].append((src, nccl_tests_record(run, src)))
            if sniff(text.replace("busbw", "")) == "nccl-log":  # its NCCL_DEBUG=INFO lines; nodes from the table
                log = parse_nccl_log(text, src)
                acc["logs"].append((src, replace(log, nodes=max(log.nodes, run.nodes))))
        elif kind == "perfquery":  # one Counters per port
            acc["counters"].extend((src, c) for c in parse_perfquery(text, src))
        elif kind in _PARSERS:
            name, parse = _PARSERS[kind]
            acc[name].append((src, parse(text, src)))
        else:
            raise SpecError(f"doctor input ({src!r}) is not nccl-tests output, an NCCL_DEBUG=INFO log, ibstat, "
                            "ibv_devinfo, perfquery, ethtool -S or -i, lspci -vv output, nvidia-smi --query-gpu "
                            "CSV, -q -x or topo -m, or a slowlink record")
    return Inputs(**{k: tuple(v) for k, v in acc.items()})


def model_predictor(cluster_path: Path) -> Predictor:
    """busbw (GB/s) the collective model predicts for (op, size, ranks) on a cluster file, block placement."""
    from slowlink.collectives import predict
    from slowlink.collectives.model import default_group
    from slowlink.spec.cluster import load_cluster

    cluster = load_cluster(cluster_path)

    def busbw(op: str, size_bytes: float, ranks: int) -> float:
        return predict(cluster, op, size_bytes, default_group(cluster, ranks)).busbw_bytes_s / units.GB

    return busbw


def baseline_findings(inp: Inputs, baseline: Path, tolerance: float) -> list[Finding]:
    """Each collectives input against a baseline record (or nccl-tests file): regressed rows are warnings."""
    from slowlink.bench.compare import Tolerance, compare_records

    base = load_record(baseline)
    out = []
    for src, rec in inp.records:
        if rec.kind != base.kind or src == str(baseline):
            continue
        moves = compare_records(base, rec, Tolerance(tolerance))
        bad = sorted((m for m in moves if m.status == "regressed"), key=lambda m: -m.slowdown_pct)
        ev = tuple(f"{src}: {m.key}: {m.metric} {m.result:.4g} vs {m.baseline:.4g} (+{m.slowdown_pct:.0f}%)"
                   for m in bad[:4])
        out.append(Finding("collective", "warning", f"{len(bad)} of {len(moves)} rows slower than baseline "
                           f"{baseline.name} by > {100 * tolerance:.0f}%", ev,
                           "something changed since the baseline: compare versions and links (above)")
                   if bad else Finding("collective", "ok", f"{len(moves)} rows within {100 * tolerance:.0f}% "
                                       f"of baseline {baseline.name}"))
    return out


def diagnose(inp: Inputs, predictor: Predictor | None = None, baseline: Path | None = None,
             tolerance: float = DEFAULT_TOLERANCE, extra: list[Finding] | None = None) -> Diagnosis:
    """Every check, ordered by :data:`LAYERS` (bottom-up), errors first within a layer."""
    if not 0 < tolerance < 1:
        raise SpecError(f"--tolerance ({100 * tolerance:g}%) must be between 0 and 100%")
    found = [*(extra or []), *check_links(inp), *check_gpus(inp), *check_versions(inp), *check_affinity(inp),
             *check_transport(inp), *check_collectives(inp, predictor, tolerance)]
    if baseline is not None:
        found += baseline_findings(inp, baseline, tolerance)
    rank = {"error": 0, "warning": 1, "ok": 2}
    found.sort(key=lambda f: (LAYERS.index(f.layer), rank[f.severity]))
    return Diagnosis(tuple(found))
