"""The design space of `slowlink search`: hardware axes x parallel axes, a workload, a token budget and
constraints; validated with pydantic, then frozen into a :class:`Space` whose configurations are numbered
hardware-major (configuration ``i`` = hardware ``i // P``, parallel layout ``i % P``).
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from slowlink.cost.design import Design
from slowlink.cost.prices import PriceBook, load_prices
from slowlink.errors import SpecError
from slowlink.fileio import SPEC_CONFIG, format_validation_error, read_mapping
from slowlink.spec.reliability import ReliabilitySpec
from slowlink.spec.storage import StorageSpec
from slowlink.spec.workload import Workload, load_workload

Count = Annotated[int, Field(ge=1)]
Positive = Annotated[float, Field(gt=0)]


def _nonempty(v: list[Any]) -> list[Any]:
    if not v:
        raise ValueError("must list at least one value")
    if len(set(map(repr, v))) != len(v):
        raise ValueError(f"lists a value twice ({v})")
    return v


class HardwareAxes(BaseModel):
    model_config = SPEC_CONFIG
    gpu: list[str] = Field(description="Catalog GPU names with a server in the price book.")
    nodes: list[Count] = Field(description="Servers (NVL72: compute trays).")
    nics_per_node: list[Count] = Field(default_factory=lambda: [8], description="Compute NICs per server.")
    nic_speed_gbit_s: list[Positive] = Field(default_factory=lambda: [400.0], description="NIC line rates.")
    transport: list[Literal["infiniband", "roce"]] = Field(["infiniband"],
                                                           description="Scale-out transports.")
    topology: list[Literal["fat-tree", "rail-optimized"]] = Field(["rail-optimized"],
                                                                  description="Fabric shapes.")
    oversubscription: list[Annotated[float, Field(ge=1)]] = Field(default_factory=lambda: [1.0],
                                                                  description="Leaf ratios (down:up), >= 1.")

    _check = field_validator("*")(_nonempty)


class ParallelAxes(BaseModel):
    model_config = SPEC_CONFIG
    tp: list[Count] = Field(default_factory=lambda: [1], description="Tensor-parallel sizes.")
    pp: list[Count] = Field(default_factory=lambda: [1], description="Pipeline stages.")
    cp: list[Count] = Field(default_factory=lambda: [1], description="Context-parallel sizes.")
    ep: list[Count] = Field(default_factory=lambda: [1], description="Expert-parallel sizes.")
    vp: list[Count] = Field(default_factory=lambda: [1], description="Virtual stages per pipeline rank.")
    micro_batch: list[Count] = Field(default_factory=lambda: [1], description="Micro-batch sizes.")
    zero: list[Annotated[int, Field(ge=0, le=3)]] = Field(default_factory=lambda: [1], description="ZeRO stages.")
    recompute: list[Literal["none", "selective", "full"]] = Field(["selective"],
                                                                  description="Activation recomputation.")

    _check = field_validator("*")(_nonempty)


class Constraints(BaseModel):
    model_config = SPEC_CONFIG
    budget_usd: float | None = Field(None, gt=0, description="Most capex, USD.")
    power_kw: float | None = Field(None, gt=0, description="Most facility power, kW.")
    max_gpus: int | None = Field(None, ge=1, description="Most GPUs.")
    deadline_days: float | None = Field(None, gt=0, description="Train the token budget within this, days.")


class SpaceSpec(BaseModel):
    """The search file, as written."""

    model_config = SPEC_CONFIG
    name: str = Field(description="Name shown in reports.")
    workload: str = Field(description="Workload file, relative to the search file; its parallel section is "
                          "replaced by each configuration's (dp = GPUs / (tp pp cp)).")
    tokens: float = Field(gt=0, description="Token budget of the training run.")
    prices: str | None = Field(None, description="Your quotes, relative to the search file (--prices keys).")
    hardware: HardwareAxes = Field(description="Hardware axes.")
    parallel: ParallelAxes = Field(default_factory=ParallelAxes, description="Parallel-layout axes.")
    constraints: Constraints = Field(default_factory=Constraints, description="Limits a design must meet.")
    storage: StorageSpec | None = Field(None, description="The shared storage every design gets (the cluster "
                                        "file's storage: section): prices the data stall and the checkpoints.")
    reliability: ReliabilitySpec | None = Field(None, description="Failure rates and recovery times of every "
                                                "design (the cluster file's reliability: section).")


PARALLEL_KEYS = ("tp", "pp", "cp", "ep", "vp", "micro_batch", "zero", "recompute")


@dataclass(frozen=True)
class Layout:
    """One parallel layout of a space: the degrees and the training knobs it sets (:data:`PARALLEL_KEYS`)."""

    tp: int
    pp: int
    cp: int
    ep: int
    vp: int
    micro_batch: int
    zero: int
    recompute: str

    @property
    def model_parallel(self) -> int:
        """GPUs of one model replica: ``tp x pp x cp`` (dp is the GPUs over it)."""
        return self.tp * self.pp * self.cp

    def parallel(self, dp: int) -> dict[str, Any]:
        """The workload's ``parallel:`` keys this layout sets, with ``dp``."""
        return {"tp": self.tp, "pp": self.pp, "cp": self.cp, "ep": self.ep, "vp": self.vp, "zero": self.zero,
                "dp": dp}

    def training(self) -> dict[str, Any]:
        """The workload's ``training:`` keys this layout sets."""
        return {"micro_batch": self.micro_batch, "recompute": self.recompute}


@dataclass(frozen=True)
class Space:
    """A resolved space: the workload, the price book and every axis value, in order."""

    name: str
    workload: Workload
    tokens: float
    prices: PriceBook
    hardware: tuple[Design, ...]
    layouts: tuple[tuple[Any, ...], ...]   # one tuple per layout, in PARALLEL_KEYS order
    constraints: Constraints
    shared: dict[str, Any] = field(default_factory=dict)   # storage: and reliability: of every design, as written
    workload_file: dict[str, Any] = field(default_factory=dict)  # the workload file as written (--emit)
    prices_path: Path | None = None

    @property
    def size(self) -> int:
        return len(self.hardware) * len(self.layouts)

    def layout(self, i: int) -> Layout:
        return Layout(*self.layouts[i])

    def design_of(self, i: int) -> Design:
        """The hardware design of configuration ``i``."""
        return self.hardware[i // len(self.layouts)]

    def workload_of(self, lay: Layout, dp: int) -> Workload:
        """The workload with the parallel layout ``lay`` (dp: the GPUs / (tp pp cp))."""
        w = self.workload
        return replace(w, parallel=replace(w.parallel, **lay.parallel(dp)),
                       training=replace(w.training, **lay.training()))

    def workload_mapping(self, lay: Layout, dp: int) -> dict[str, Any]:
        """The workload file of :meth:`workload_of`: the file as written with the layout and the budget in it."""
        data = copy.deepcopy(self.workload_file)
        data.setdefault("parallel", {}).update(lay.parallel(dp))
        data.setdefault("training", {}).update(lay.training() | {"tokens": self.tokens})
        return data


def space_from_mapping(data: dict[str, Any], source: str, base_dir: Path) -> Space:
    """Validate a search file and resolve its workload and prices (paths relative to ``base_dir``)."""
    try:
        spec = SpaceSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc, source, "search")) from None
    workload_path = base_dir / spec.workload
    workload = load_workload(workload_path)
    prices_path = base_dir / spec.prices if spec.prices else None
    prices = load_prices(prices_path)
    h = spec.hardware
    hardware = tuple(Design(*v) for v in itertools.product(h.gpu, h.nodes, h.nics_per_node, h.nic_speed_gbit_s,
                                                           h.transport, h.topology, h.oversubscription))
    p = spec.parallel
    layouts = tuple(itertools.product(*(getattr(p, k) for k in PARALLEL_KEYS)))
    shared = {k: data[k] for k in ("storage", "reliability") if data.get(k) is not None}
    return Space(spec.name, workload, spec.tokens, prices, hardware, layouts, spec.constraints, shared,
                 read_mapping(workload_path, "workload"), prices_path)


def load_space(path: Path | str) -> Space:
    """Read, validate and resolve a search file."""
    p = Path(path)
    return space_from_mapping(read_mapping(p), str(p), p.parent)
