"""A shared-cluster scenario made runnable: its jobs (listed, a synthetic stream drawn, or a trace read), the
cluster's shape, and the rules across keys checked.

The file's schema and its resolution are :mod:`slowlink.spec.share`. :func:`load_share` reads a file into a
:class:`~slowlink.spec.share.Share`, the job list and the shape; every bad value is a :class:`SpecError` naming
the field, the value and the rule.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

import numpy as np
import yaml

from slowlink import units
from slowlink.errors import SpecError
from slowlink.share import mig
from slowlink.share.jobs import Job, synthetic_jobs
from slowlink.spec.share import Share, Timeslice, read_share

FILL_DURATION_S = 1e9  # replay fill: a run time no replay of a trace's jobs (one a second) comes near


@functools.cache
def timeslice_defaults() -> dict[str, float]:
    """``efficiency`` and ``replicas`` of time slicing, with their sources (data/timeslice.yaml)."""
    text = resources.files("slowlink.share").joinpath("data/timeslice.yaml").read_text()
    raw = yaml.safe_load(text)
    return {"efficiency": float(raw["efficiency"]), "replicas": float(raw["replicas"])}


@dataclass(frozen=True)
class Shape:
    """The cluster as the simulator sees it (SI units)."""

    nodes: int
    gpus_per_node: int
    gpu: str
    hbm_bytes: float

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node


def planned_comm_fraction(cluster_path: Path, workload_path: Path) -> float:
    """Exposed inter-node communication / step time of the step model's plan: every dimension's exposed
    communication except TP's when TP stays inside a node (shortcut: CP, EP, PP and DP are counted as
    inter-node, as they are when TP fills the node)."""
    from slowlink.spec.cluster import load_cluster
    from slowlink.spec.workload import load_workload
    from slowlink.workload.step import plan

    r = plan(load_workload(workload_path), load_cluster(cluster_path))
    inter = sum(s for dim, s in r.comm_s.items() if dim != "tp" or r.tp_spans_nodes)
    return inter / r.step_time_s


def timeslice_settings(ts: Timeslice) -> tuple[int, float, bool]:
    """(replicas, efficiency, reserve) of time slicing: the scenario's, the bundled defaults where not given."""
    d = timeslice_defaults()
    return (int(d["replicas"]) if ts.replicas is None else ts.replicas,
            d["efficiency"] if ts.efficiency is None else ts.efficiency, ts.reserve)


def _listed(spec: Share, base_dir: Path, source: str) -> list[Job]:
    jobs = []
    for i, j in enumerate(spec.jobs or ()):
        comm = j.comm_fraction
        if j.plan is not None:
            for key, name in zip(("cluster", "workload"), j.plan, strict=True):
                if not (base_dir / name).is_file():
                    raise SpecError(f"{source}: jobs.{i}.plan.{key} ({name!r}): file does not exist (paths are "
                                    "relative to the scenario file)")
            comm = planned_comm_fraction(base_dir / j.plan[0], base_dir / j.plan[1])
        jobs.append(Job(j.id or f"j{i}", j.arrival_s, j.gpus, j.duration_s, j.kind, j.compute_fraction,
                        j.memory_bytes, j.mig_profile, comm))
    return jobs


def build_jobs(spec: Share, base_dir: Path, source: str = "share") -> list[Job]:
    """The scenario's jobs, sorted by arrival: listed, synthetic or read from the trace."""
    if spec.trace is not None:
        from slowlink.share.trace import read_trace

        fill = spec.trace.replay == "fill"
        jobs = read_trace(base_dir / spec.trace.path, spec.trace.format, spec.trace.limit, unscheduled=fill)
        if fill:
            jobs = [replace(j, arrival_s=float(i), duration_s=FILL_DURATION_S) for i, j in enumerate(jobs)]
    elif spec.synthetic is not None:
        s = spec.synthetic
        jobs = synthetic_jobs(s.jobs, s.mean_interarrival_s, s.classes, np.random.default_rng(spec.seed))
    else:
        jobs = _listed(spec, base_dir, source)
    return sorted(jobs, key=lambda j: j.arrival_s)


def _check_profiles(spec: Share, shape: Shape, source: str) -> None:
    names = [(f"jobs.{i}.mig_profile", j.mig_profile) for i, j in enumerate(spec.jobs or [])]
    names += [(f"synthetic.classes.{i}.mig_profile", c.mig_profile)
              for i, c in enumerate(spec.synthetic.classes if spec.synthetic else [])]
    if not any(p.slicing == "mig" for p in spec.policies):
        return
    known = mig.profiles(shape.gpu)
    for field, name in names:
        if name is not None and name not in known:
            raise SpecError(f"{source}: {field} ({name!r}): must be a MIG profile of {shape.gpu}: {', '.join(known)}")


def check_share(spec: Share, jobs: list[Job], source: str) -> Shape:
    """Rules across keys: the GPU is in the catalog, per-gpu goes with whole GPUs, every job fits the cluster."""
    from slowlink.catalog.store import load_catalog

    gpu = load_catalog().gpu(spec.gpu, f"{source}: cluster.gpu")
    shape = Shape(spec.nodes, spec.gpus_per_node, spec.gpu, gpu.hbm_bytes)
    labels = [p.label for p in spec.policies]
    for i, p in enumerate(spec.policies):
        if p.label in labels[:i]:
            raise SpecError(f"{source}: policies.{i} ({p.label!r}) has the name of policies.{labels.index(p.label)}: "
                            "give each policy its own name")
        if p.exclusive_nodes and (p.scheduler, p.slicing) != ("gang", "whole"):
            raise SpecError(f"{source}: policies.{i}.exclusive_nodes (True): needs scheduler gang and slicing whole")
        if p.scheduler == "per-gpu" and p.slicing != "whole":
            raise SpecError(f"{source}: policies.{i}.slicing ({p.slicing!r}): the per-gpu scheduler is modelled "
                            "with whole GPUs only; use scheduler gang for mig or timeslice")
    _check_profiles(spec, shape, source)
    seen: set[str] = set()
    for j in jobs:
        if j.id in seen:
            raise SpecError(f"{source}: job id ({j.id!r}) is given twice: each job needs its own id")
        seen.add(j.id)
        if j.gpus > shape.gpus:
            raise SpecError(f"{source}: job {j.id} gpus ({j.gpus}): must be <= the cluster's {shape.gpus} GPUs")
        if j.memory_bytes > shape.hbm_bytes:
            raise SpecError(f"{source}: job {j.id} memory_gib ({j.memory_bytes / units.GiB:g}): must be <= "
                            f"{shape.gpu}'s {shape.hbm_bytes / units.GiB:g} GiB")
    return shape


def load_share(path: Path | str) -> tuple[Share, list[Job], Shape]:
    """Read and validate a share scenario file, its jobs and the cluster shape."""
    spec, source = read_share(path)
    jobs = build_jobs(spec, Path(path).parent, source)
    return spec, jobs, check_share(spec, jobs, source)
