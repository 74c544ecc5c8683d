"""The shared-cluster scenario file (`slowlink share SCENARIO.yaml`): the cluster, the policies to compare, and
the job stream (a list, a synthetic stream or a public trace), validated with pydantic.

YAML keys are a contract (docs/share.md): added, never renamed. :func:`load_share` reads a file into a
:class:`ShareSpec` and the job list; every bad value is a :class:`SpecError` naming the field, the value
and the rule.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Literal

import numpy as np
import yaml
from pydantic import BaseModel, Field, ValidationError, model_validator

from slowlink import units
from slowlink.errors import SpecError
from slowlink.fileio import SPEC_CONFIG, check_kind, format_validation_error, read_mapping, source_name
from slowlink.share import mig
from slowlink.share.jobs import Job, JobClass, Kind, synthetic_jobs

FILL_DURATION_S = 1e9  # replay fill: a run time no replay of a trace's jobs (one a second) comes near


@functools.cache
def timeslice_defaults() -> dict[str, float]:
    """``efficiency`` and ``replicas`` of time slicing, with their sources (data/timeslice.yaml)."""
    text = resources.files("slowlink.share").joinpath("data/timeslice.yaml").read_text()
    raw = yaml.safe_load(text)
    return {"efficiency": float(raw["efficiency"]), "replicas": float(raw["replicas"])}


class ClusterShape(BaseModel):
    model_config = SPEC_CONFIG
    nodes: int = Field(ge=1, description="Nodes of the shared cluster.")
    gpus_per_node: int = Field(8, ge=1, description="GPUs per node.")
    gpu: str = Field("h100-sxm", description="Catalog GPU name (its memory; its MIG profiles for slicing mig).")


class PolicySpec(BaseModel):
    model_config = SPEC_CONFIG
    name: str | None = Field(None, description="Name in the report; default scheduler/slicing.")
    scheduler: Literal["per-gpu", "gang"] = Field(
        description="per-gpu: each free GPU goes to the next pending rank, as a pod-by-pod scheduler does; "
        "gang: a job starts only when all its GPUs are free at once (all-or-nothing).")
    slicing: Literal["whole", "mig", "timeslice"] = Field(
        "whole", description="whole: one job per GPU; mig: single-GPU jobs on MIG instances; timeslice: up to "
        "`timeslice.replicas` jobs share a GPU by time slices.")
    backfill: bool = Field(True, description="gang: let a later job start when the first one waiting does not fit.")
    window: int = Field(64, ge=1, description="Waiting jobs the scheduler looks at in one pass (gang: its backfill "
                        "depth; per-gpu: the jobs whose pending ranks get GPUs).")
    exclusive_nodes: bool = Field(False, description="gang, whole: a job larger than a node gets whole nodes only "
                                  "(its rest node too), so no other job shares its NICs.")

    @property
    def label(self) -> str:
        return self.name or f"{self.scheduler}/{self.slicing}"


class PlanRef(BaseModel):
    model_config = SPEC_CONFIG
    cluster: str = Field(description="Cluster file the job would run on alone, relative to the scenario file.")
    workload: str = Field(description="Workload file, relative to the scenario file.")


class JobSpec(BaseModel):
    model_config = SPEC_CONFIG
    id: str | None = Field(None, description="Name in reports; default j<index>.")
    arrival_s: float = Field(0.0, ge=0, description="Submission time, seconds.")
    gpus: int = Field(ge=1, description="GPUs; more than one: a distributed job whose ranks all run at once.")
    duration_s: float = Field(gt=0, description="Run time alone on whole GPUs, seconds.")
    kind: Kind = Field("training", description="training, fine-tuning, inference or data-processing.")
    compute_fraction: float = Field(1.0, gt=0, le=1, description="Share of a GPU's compute it keeps busy alone.")
    memory_gib: float = Field(0.0, ge=0, description="GPU memory per rank, GiB (MIG profile choice, time slicing).")
    mig_profile: str | None = Field(None, description="MIG profile it asks for; default: the smallest that fits.")
    comm_fraction: float = Field(0.0, ge=0, lt=1, description="Share of its run time alone spent in inter-node "
                                 "communication (e.g. a plan's exposed communication / step time).")
    plan: PlanRef | None = Field(None, description="Take comm_fraction from `slowlink plan` of this cluster and "
                                 "workload: the exposed inter-node communication / step time.")

    @model_validator(mode="after")
    def _one_comm(self) -> JobSpec:
        if self.plan is not None and self.comm_fraction:
            raise ValueError(f"comm_fraction ({self.comm_fraction}) and plan are both given: give one of them")
        return self


class JobClassSpec(BaseModel):
    model_config = SPEC_CONFIG
    kind: Kind = Field(description="Kind of the class's jobs.")
    share: float = Field(gt=0, description="Relative share of arrivals.")
    gpus: list[int] = Field(min_length=1, description="GPU counts, drawn uniformly.")
    mean_duration_s: float = Field(gt=0, description="Mean run time alone (exponential), seconds.")
    compute_fraction: float = Field(1.0, gt=0, le=1, description="As a job's compute_fraction.")
    memory_gib: float = Field(0.0, ge=0, description="As a job's memory_gib.")
    mig_profile: str | None = Field(None, description="As a job's mig_profile.")
    comm_fraction: float = Field(0.0, ge=0, lt=1, description="As a job's comm_fraction.")


class SyntheticSpec(BaseModel):
    model_config = SPEC_CONFIG
    jobs: int = Field(ge=1, description="Jobs in the stream.")
    mean_interarrival_s: float = Field(gt=0, description="Mean gap between arrivals (Poisson), seconds.")
    classes: list[JobClassSpec] = Field(min_length=1, description="Job classes and their shares.")


class TraceSpec(BaseModel):
    model_config = SPEC_CONFIG
    path: str = Field(description="Trace file, relative to the scenario file.")
    format: Literal["openb", "philly", "philly-jobs"] = Field(
        description="openb: Alibaba cluster-trace-gpu-v2023 openb_pod_list_*.csv; philly: Microsoft Philly "
        "cluster_job_log (JSON list); philly-jobs: Philly jobs cut down to id, num_gpus, attempts, submitted_time "
        "(the layout of tests/data/share/philly_jobs_4gpu_pass.json).")
    limit: int | None = Field(None, ge=1, description="Read only the first N jobs (by submission time).")
    replay: Literal["timed", "fill"] = Field(
        "timed", description="timed: the trace's arrival and run times; fill: one job a second in trace order, "
        "none leaving (the FGD paper's evaluation: tasks submitted until the cluster is full).")


class TimesliceSpec(BaseModel):
    model_config = SPEC_CONFIG
    replicas: int = Field(default_factory=lambda: int(timeslice_defaults()["replicas"]), ge=1,
                          description="Jobs one GPU may hold at once (the device plugin's replicas).")
    efficiency: float = Field(default_factory=lambda: timeslice_defaults()["efficiency"], gt=0, le=1,
                              description="Share of its fair slice a job gets while others share its GPU.")
    reserve: bool = Field(False, description="true: a GPU takes jobs only while their compute_fraction sums to <= "
                          "1, and each runs at full speed in its share (fractional GPU reservations, as the openb "
                          "trace's gpu_milli); false: time slices oversubscribe the GPU.")


class ShareSpec(BaseModel):
    model_config = SPEC_CONFIG
    name: str | None = Field(None, description="Name of the scenario.")
    cluster: ClusterShape = Field(description="The shared cluster's shape.")
    policies: list[PolicySpec] = Field(min_length=1, description="Policies to compare on the same jobs.")
    jobs: list[JobSpec] | None = Field(None, min_length=1, description="The jobs, listed.")
    synthetic: SyntheticSpec | None = Field(None, description="A synthetic job stream.")
    trace: TraceSpec | None = Field(None, description="A public trace to replay.")
    timeslice: TimesliceSpec = Field(default_factory=TimesliceSpec, description="Time-slicing settings.")
    seed: int = Field(0, description="Seed of the synthetic stream.")

    @model_validator(mode="after")
    def _one_source(self) -> ShareSpec:
        given = [k for k in ("jobs", "synthetic", "trace") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"jobs, synthetic and trace ({', '.join(given) or 'none given'}): give exactly one")
        return self


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


def _listed(spec: ShareSpec, base_dir: Path, source: str) -> list[Job]:
    assert spec.jobs is not None
    jobs = []
    for i, j in enumerate(spec.jobs):
        comm = j.comm_fraction
        if j.plan is not None:
            for key, name in (("cluster", j.plan.cluster), ("workload", j.plan.workload)):
                if not (base_dir / name).is_file():
                    raise SpecError(f"{source}: jobs.{i}.plan.{key} ({name!r}): file does not exist (paths are "
                                    "relative to the scenario file)")
            comm = planned_comm_fraction(base_dir / j.plan.cluster, base_dir / j.plan.workload)
        jobs.append(Job(j.id or f"j{i}", j.arrival_s, j.gpus, j.duration_s, j.kind, j.compute_fraction,
                        j.memory_gib * units.GiB, j.mig_profile, comm))
    return jobs


def _synthetic(spec: ShareSpec) -> list[Job]:
    s = spec.synthetic
    assert s is not None
    classes = tuple(JobClass(c.kind, c.share, tuple(c.gpus), c.mean_duration_s, c.compute_fraction,
                             c.memory_gib * units.GiB, c.mig_profile, c.comm_fraction) for c in s.classes)
    return synthetic_jobs(s.jobs, s.mean_interarrival_s, classes, np.random.default_rng(spec.seed))


def build_jobs(spec: ShareSpec, base_dir: Path, source: str = "share") -> list[Job]:
    """The scenario's jobs, sorted by arrival: listed, synthetic or read from the trace."""
    if spec.trace is not None:
        from slowlink.share.trace import read_trace

        fill = spec.trace.replay == "fill"
        jobs = read_trace(base_dir / spec.trace.path, spec.trace.format, spec.trace.limit, unscheduled=fill)
        if fill:
            jobs = [replace(j, arrival_s=float(i), duration_s=FILL_DURATION_S) for i, j in enumerate(jobs)]
    else:
        jobs = _listed(spec, base_dir, source) if spec.jobs is not None else _synthetic(spec)
    return sorted(jobs, key=lambda j: j.arrival_s)


def _check_profiles(spec: ShareSpec, shape: Shape, source: str) -> None:
    names = [(f"jobs.{i}.mig_profile", j.mig_profile) for i, j in enumerate(spec.jobs or [])]
    names += [(f"synthetic.classes.{i}.mig_profile", c.mig_profile)
              for i, c in enumerate(spec.synthetic.classes if spec.synthetic else [])]
    if not any(p.slicing == "mig" for p in spec.policies):
        return
    known = mig.profiles(shape.gpu)
    for field, name in names:
        if name is not None and name not in known:
            raise SpecError(f"{source}: {field} ({name!r}): must be a MIG profile of {shape.gpu}: {', '.join(known)}")


def check_share(spec: ShareSpec, jobs: list[Job], source: str) -> Shape:
    """Rules across keys: the GPU is in the catalog, per-gpu goes with whole GPUs, every job fits the cluster."""
    from slowlink.catalog.store import load_catalog

    gpu = load_catalog().gpu(spec.cluster.gpu, f"{source}: cluster.gpu")
    shape = Shape(spec.cluster.nodes, spec.cluster.gpus_per_node, spec.cluster.gpu, gpu.hbm_bytes)
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


def load_share(path: Path | str) -> tuple[ShareSpec, list[Job], Shape]:
    """Read and validate a share scenario file, its jobs and the cluster shape."""
    p = Path(path)
    data = read_mapping(p, "scenario")
    source = source_name(p, "scenario")
    check_kind(data, "share", source)
    try:
        spec = ShareSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc, source, "share")) from None
    jobs = build_jobs(spec, p.parent, source)
    return spec, jobs, check_share(spec, jobs, source)
