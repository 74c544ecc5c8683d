"""The shared-cluster scenario file (``slowlink share SCENARIO.yaml``): the cluster, the policies to compare, and
the job stream (a list, a synthetic stream or a public trace).

Validated with pydantic (the ``*Spec`` models, keys as written: a contract, docs/share.md, added and never
renamed), then resolved once into frozen dataclasses (:class:`Share`, :class:`Policy`, :class:`ListedJob`,
:class:`JobClass`, :class:`Synthetic`, :class:`TraceSource`, :class:`Timeslice`; sizes in bytes) that
:mod:`slowlink.share` reads. The jobs themselves are built there (a synthetic stream drawn, a trace read).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from slowlink import units
from slowlink.fileio import SPEC_CONFIG, check_kind, read_mapping, source_name, validated

Kind = Literal["training", "fine-tuning", "inference", "data-processing"]
KINDS: tuple[Kind, ...] = ("training", "fine-tuning", "inference", "data-processing")
Scheduler = Literal["per-gpu", "gang"]
Slicing = Literal["whole", "mig", "timeslice"]
TraceFormat = Literal["openb", "philly", "philly-jobs"]


class ClusterShape(BaseModel):
    model_config = SPEC_CONFIG
    nodes: int = Field(ge=1, description="Nodes of the shared cluster.")
    gpus_per_node: int = Field(8, ge=1, description="GPUs per node.")
    gpu: str = Field("h100-sxm", description="Catalog GPU name (its memory; its MIG profiles for slicing mig).")


class PolicySpec(BaseModel):
    model_config = SPEC_CONFIG
    name: str | None = Field(None, description="Name in the report; default scheduler/slicing.")
    scheduler: Scheduler = Field(
        description="per-gpu: each free GPU goes to the next pending rank, as a pod-by-pod scheduler does; "
        "gang: a job starts only when all its GPUs are free at once (all-or-nothing).")
    slicing: Slicing = Field(
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
    format: TraceFormat = Field(
        description="openb: Alibaba cluster-trace-gpu-v2023 openb_pod_list_*.csv; philly: Microsoft Philly "
        "cluster_job_log (JSON list); philly-jobs: Philly jobs cut down to id, num_gpus, attempts, submitted_time "
        "(the layout of tests/data/share/philly_jobs_4gpu_pass.json).")
    limit: int | None = Field(None, ge=1, description="Read only the first N jobs (by submission time).")
    replay: Literal["timed", "fill"] = Field(
        "timed", description="timed: the trace's arrival and run times; fill: one job a second in trace order, "
        "none leaving (the FGD paper's evaluation: tasks submitted until the cluster is full).")


class TimesliceSpec(BaseModel):
    model_config = SPEC_CONFIG
    replicas: int | None = Field(None, ge=1, description="Jobs one GPU may hold at once (the device plugin's "
                                 "replicas); default: share/data/timeslice.yaml.")
    efficiency: float | None = Field(None, gt=0, le=1, description="Share of its fair slice a job gets while "
                                     "others share its GPU; default: share/data/timeslice.yaml.")
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
class Policy:
    """A scheduling policy, resolved (fields as :class:`PolicySpec` documents them)."""

    scheduler: Scheduler
    slicing: Slicing = "whole"
    name: str | None = None
    backfill: bool = True
    window: int = 64
    exclusive_nodes: bool = False

    @property
    def label(self) -> str:
        return self.name or f"{self.scheduler}/{self.slicing}"

    @classmethod
    def of(cls, p: PolicySpec) -> Policy:
        return cls(p.scheduler, p.slicing, p.name, p.backfill, p.window, p.exclusive_nodes)


@dataclass(frozen=True)
class ListedJob:
    """A job of the scenario's list (fields as :class:`JobSpec`; memory in bytes; ``plan``: the cluster and
    workload files, relative to the scenario file, whose plan gives ``comm_fraction``)."""

    id: str | None
    arrival_s: float
    gpus: int
    duration_s: float
    kind: Kind
    compute_fraction: float
    memory_bytes: float
    mig_profile: str | None
    comm_fraction: float
    plan: tuple[str, str] | None

    @classmethod
    def of(cls, j: JobSpec) -> ListedJob:
        return cls(j.id, j.arrival_s, j.gpus, j.duration_s, j.kind, j.compute_fraction, j.memory_gib * units.GiB,
                   j.mig_profile, j.comm_fraction, None if j.plan is None else (j.plan.cluster, j.plan.workload))


@dataclass(frozen=True)
class JobClass:
    """One class of a synthetic job stream: its share of arrivals and its shape (memory in bytes)."""

    kind: Kind
    share: float
    gpus: tuple[int, ...]
    mean_duration_s: float
    compute_fraction: float = 1.0
    memory_bytes: float = 0.0
    mig_profile: str | None = None
    comm_fraction: float = 0.0

    @classmethod
    def of(cls, c: JobClassSpec) -> JobClass:
        return cls(c.kind, c.share, tuple(c.gpus), c.mean_duration_s, c.compute_fraction,
                   c.memory_gib * units.GiB, c.mig_profile, c.comm_fraction)


@dataclass(frozen=True)
class Synthetic:
    """A synthetic job stream: ``jobs`` Poisson arrivals of mean gap ``mean_interarrival_s``, classes by share."""

    jobs: int
    mean_interarrival_s: float
    classes: tuple[JobClass, ...]


@dataclass(frozen=True)
class TraceSource:
    """A public trace to replay (``path`` relative to the scenario file)."""

    path: str
    format: TraceFormat
    limit: int | None = None
    replay: Literal["timed", "fill"] = "timed"


@dataclass(frozen=True)
class Timeslice:
    """Time-slicing settings; ``replicas`` and ``efficiency`` None: the bundled defaults (share/data)."""

    replicas: int | None = None
    efficiency: float | None = None
    reserve: bool = False


@dataclass(frozen=True)
class Share:
    """A shared-cluster scenario, resolved: exactly one of ``jobs``, ``synthetic`` and ``trace`` is given."""

    name: str
    nodes: int
    gpus_per_node: int
    gpu: str
    policies: tuple[Policy, ...]
    jobs: tuple[ListedJob, ...] | None = None
    synthetic: Synthetic | None = None
    trace: TraceSource | None = None
    timeslice: Timeslice = Timeslice()
    seed: int = 0

    @classmethod
    def of(cls, s: ShareSpec) -> Share:
        syn = s.synthetic
        tr = s.trace
        return cls(s.name or "share", s.cluster.nodes, s.cluster.gpus_per_node, s.cluster.gpu,
                   tuple(Policy.of(p) for p in s.policies),
                   None if s.jobs is None else tuple(ListedJob.of(j) for j in s.jobs),
                   None if syn is None else Synthetic(syn.jobs, syn.mean_interarrival_s,
                                                      tuple(JobClass.of(c) for c in syn.classes)),
                   None if tr is None else TraceSource(tr.path, tr.format, tr.limit, tr.replay),
                   Timeslice(s.timeslice.replicas, s.timeslice.efficiency, s.timeslice.reserve), s.seed)


def share_from_mapping(data: dict[str, Any], source: str = "share") -> Share:
    """Validate a parsed share scenario and resolve it."""
    check_kind(data, "share", source)
    return Share.of(validated(ShareSpec, data, source, "share"))


def read_share(path: Path | str) -> tuple[Share, str]:
    """A share scenario file, validated and resolved, and the name its messages lead with."""
    p = Path(path)
    source = source_name(p, "scenario")
    return share_from_mapping(read_mapping(p, "scenario"), source), source
