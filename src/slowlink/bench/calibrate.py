"""Fitting the collective model's latency and bandwidth to a measured sweep, and predicted-vs-measured.

For each op of a result, ``time = a + b x`` with ``x = size x busbw_factor(op, n)`` is fitted by least
squares on the relative error (each row weighted 1/t, so every size counts alike), a >= 0, b > 0. Then
hop latency = a / ring_steps(op, n) and busbw = 1 / b (see ``slowlink.collectives.calibration``).
"""

from __future__ import annotations

import contextlib
import datetime
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from slowlink import units
from slowlink.bench.record import CollectiveRow, CollectivesRecord, Record
from slowlink.collectives import Group, predict
from slowlink.collectives.calibration import alpha_beta_time_s
from slowlink.collectives.ops import busbw_factor, ring_steps
from slowlink.errors import SpecError
from slowlink.spec.calibration import PROFILE_KIND, OpFitSpec, ProfileSpec
from slowlink.spec.cluster import Cluster, load_cluster


def fit_alpha_beta(sizes: list[float], times: list[float]) -> tuple[float, float]:
    """(a seconds, b seconds per byte) minimising sum(((a + b x - t) / t)^2), a >= 0, b > 0."""
    x, t = np.asarray(sizes, dtype=float), np.asarray(times, dtype=float)
    if len(x) < 2 or np.ptp(x) == 0:
        b = float(np.mean(t / x))
        return 0.0, b
    a_mat = np.stack([1.0 / t, x / t], axis=1)
    (a, b), *_ = np.linalg.lstsq(a_mat, np.ones_like(t), rcond=None)
    if a < 0 or b <= 0:  # latency cannot be negative: refit the bandwidth alone
        a = 0.0
        b = float(np.sum(x / t) / np.sum((x / t) ** 2))
    return float(a), float(b)


def _groups(rows: list[CollectiveRow]) -> dict[tuple[str, int, str], list[CollectiveRow]]:
    out: dict[tuple[str, int, str], list[CollectiveRow]] = {}
    for r in rows:
        if r.wrong > 0:
            raise SpecError(f"result row {r.op} {r.size_bytes} B has #wrong {r.wrong}: "
                            "a wrong result cannot be calibrated on")
        out.setdefault((r.op, r.ranks, r.redop), []).append(r)
    return out


def _collectives(rec: Record) -> CollectivesRecord:
    if not isinstance(rec, CollectivesRecord):
        raise SpecError(f"calibrate needs a collectives result, got kind {rec.kind!r}")
    return rec


def fit_record(rec: Record, min_size_bytes: float = 0.0) -> list[OpFitSpec]:
    """One :class:`OpFitSpec` per (op, ranks) of a collectives record, on rows >= ``min_size_bytes``."""
    coll = _collectives(rec)
    hosts = coll.hosts or ["localhost"]
    scope = "network" if len(set(hosts)) > 1 else "scale-up"
    backend = coll.env.backend or coll.rows[0].backend or "gloo"
    fits = []
    for (op, n, redop), group in _groups(coll.rows).items():
        if redop not in ("sum", "none") or n < 2:
            continue
        rows = [r for r in group if r.size_bytes >= min_size_bytes]
        if not rows:
            raise SpecError(f"--min-size ({min_size_bytes:g} B) leaves no {op} rows to fit")
        sizes = [float(r.size_bytes) for r in rows]
        times = [r.time_s for r in rows]
        f = busbw_factor(op, n)
        a, b = fit_alpha_beta([s * f for s in sizes], times)
        hop, bw = a / max(1, ring_steps(op, n)), 1.0 / b
        errs = [abs(alpha_beta_time_s(op, s, n, hop, bw) - t) / t for s, t in zip(sizes, times, strict=True)]
        fits.append(OpFitSpec(op=op, scope=scope, ranks=n, backend=backend, hop_latency_us=hop / units.US,
                              busbw_gbyte_s=bw / units.GB, min_size_bytes=min(sizes), max_size_bytes=max(sizes),
                              max_abs_error_pct=100 * max(errs)))
    if not fits:
        raise SpecError("the result has no sum (or non-reducing) rows on >= 2 ranks to calibrate on")
    return fits


def make_profile(rec: Record, source: Path, cluster: Cluster, min_size_bytes: float = 0.0) -> ProfileSpec:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return ProfileSpec(kind=PROFILE_KIND, cluster=cluster.name, source=str(source), created_utc=now,
                       fits=fit_record(rec, min_size_bytes))


def write_profile(profile: ProfileSpec, path: Path) -> None:
    head = ("# slowlink calibration profile: measured latency per ring step and bus bandwidth per op.\n"
            "# Name it in a cluster file's `calibration:` key; `collective` and `plan` then use it.\n")
    path.write_text(head + yaml.safe_dump(profile.model_dump(), sort_keys=False))


def calibrated_cluster_text(cluster_text: str, profile_rel: str) -> str:
    """The cluster file's text with its top-level ``calibration:`` key set to ``profile_rel``."""
    line = f"calibration: {profile_rel}"
    if re.search(r"^calibration:.*$", cluster_text, flags=re.M):
        return re.sub(r"^calibration:.*$", line, cluster_text, count=1, flags=re.M)
    return cluster_text.rstrip("\n") + "\n" + line + "\n"


def calibrate(result: Path, cluster_file: Path, profile_path: Path | None = None,
              min_size_bytes: float = 0.0) -> tuple[ProfileSpec, Path, Path]:
    """Fit, write the profile and ``<cluster>.calibrated.yaml`` next to the cluster file; return both paths."""
    from slowlink.bench.record import load_record

    rec = load_record(result)
    cluster = load_cluster(cluster_file)
    profile = make_profile(rec, result, cluster, min_size_bytes)
    stem = cluster_file.name.removesuffix(".yaml").removesuffix(".yml").removesuffix(".json")
    profile_path = profile_path or cluster_file.with_name(f"{stem}.calibration.yaml")
    write_profile(profile, profile_path)
    rel = Path(profile_path).resolve()
    with contextlib.suppress(ValueError):  # outside the cluster's folder: keep the absolute path
        rel = rel.relative_to(cluster_file.resolve().parent)
    out_cluster = cluster_file.with_name(f"{stem}.calibrated.yaml")
    out_cluster.write_text(calibrated_cluster_text(cluster_file.read_text(), str(rel)))
    load_cluster(out_cluster)  # the file we wrote must load
    return profile, profile_path, out_cluster


@dataclass(frozen=True)
class PredictedPoint:
    """One row of a measured sweep beside the collective model: the ``op`` on ``ranks`` at ``size_bytes``, the
    measured and predicted time and busbw, the time's ``error_pct`` (predicted / measured - 1) and the
    ``algorithm`` the model picked."""

    op: str
    size_bytes: float
    ranks: int
    measured_time_s: float
    predicted_time_s: float
    measured_busbw_gbyte_s: float
    predicted_busbw_gbyte_s: float
    error_pct: float
    algorithm: str

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "size_bytes": self.size_bytes, "ranks": self.ranks,
                "measured_time_s": self.measured_time_s, "predicted_time_s": self.predicted_time_s,
                "measured_busbw_gbyte_s": self.measured_busbw_gbyte_s,
                "predicted_busbw_gbyte_s": self.predicted_busbw_gbyte_s, "error_pct": self.error_pct,
                "algorithm": self.algorithm}


def predicted_vs_measured(cluster: Cluster, rec: Record) -> list[PredictedPoint]:
    """For every sum (or non-reducing) row: the model's time and busbw against the measurement (the record's
    own values, as written)."""
    if not isinstance(rec, CollectivesRecord):
        raise SpecError(f"collective --compare needs a collectives result, got kind {rec.kind!r}")
    hosts = rec.hosts
    points = []
    for r in rec.rows:
        if r.redop not in ("sum", "none"):
            continue
        nodes = max(1, len(set(hosts))) if hosts else 1
        grp = Group(ranks=r.ranks, ranks_per_node=max(1, -(-r.ranks // nodes)))
        p = predict(cluster, r.op, float(r.size_bytes), grp)
        points.append(PredictedPoint(r.op, r.size_bytes, r.ranks, r.time_s, p.time_s, r.busbw_gbyte_s,
                                     p.busbw_bytes_s / units.GB, 100 * (p.time_s - r.time_s) / r.time_s,
                                     p.algorithm))
    if not points:
        raise SpecError("the result has no sum (or non-reducing) rows to compare with")
    return points
