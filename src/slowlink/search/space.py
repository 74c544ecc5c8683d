"""The design space of `slowlink search`: the search file (its schema: :mod:`slowlink.spec.space`) resolved into a
:class:`Space` whose configurations are numbered hardware-major (configuration ``i`` = hardware ``i // P``,
parallel layout ``i % P``). A space with ``sites:`` gives each hardware design one placement per site count and
DCI link count (site count major); with ``sync:`` each layout one option per sync method.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from slowlink.cost.design import Design
from slowlink.cost.prices import PriceBook, load_prices
from slowlink.fileio import read_mapping, validated
from slowlink.spec.space import Limits, SpaceSpec
from slowlink.spec.workload import Sync, Workload, load_workload

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
    sync: Sync | None = None  # how the sites' replicas sync (None: the workload's)

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
    constraints: Limits
    shared: dict[str, Any] = field(default_factory=dict)   # storage: and reliability: of every design, as written
    workload_file: dict[str, Any] = field(default_factory=dict)  # the workload file as written (--emit)
    prices_path: Path | None = None
    syncs: tuple[Sync, ...] = ()  # the sync options of every layout (none: the workload's)

    @property
    def across_sites(self) -> bool:
        """The space splits designs over sites (its ``sites:`` section)."""
        return "interconnect" in self.shared

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
        w = replace(w, parallel=replace(w.parallel, **lay.parallel(dp)), training=replace(w.training, **lay.training()))
        return w if lay.sync is None else replace(w, sync=lay.sync)

    def workload_mapping(self, lay: Layout, dp: int) -> dict[str, Any]:
        """The workload file of :meth:`workload_of`: the file as written with the layout and the budget in it."""
        data = copy.deepcopy(self.workload_file)
        data.setdefault("parallel", {}).update(lay.parallel(dp))
        data.setdefault("training", {}).update(lay.training() | {"tokens": self.tokens})
        if lay.sync is not None:
            data["sync"] = sync_mapping(lay.sync)
        return data


def sync_mapping(sync: Sync) -> dict[str, Any]:
    """The workload file's ``sync:`` section of ``sync`` (only the keys its method takes)."""
    out: dict[str, Any] = {"method": sync.method}
    if sync.method in ("diloco", "streaming-diloco"):
        out |= {"inner_steps": sync.inner_steps, "outer_optimizer": sync.outer_optimizer,
                "outer_dtype": sync.outer_dtype}
    if sync.method == "streaming-diloco":
        out |= {"fragments": sync.fragments, "overlap_steps": sync.overlap_steps}
    if sync.crosses != "dp":
        out["crosses"] = sync.crosses
    return out


def space_from_mapping(data: dict[str, Any], source: str, base_dir: Path) -> Space:
    """Validate a search file and resolve its workload and prices (paths relative to ``base_dir``)."""
    spec = validated(SpaceSpec, data, source, "search")
    workload_path = base_dir / spec.workload
    workload = load_workload(workload_path)
    prices_path = base_dir / spec.prices if spec.prices else None
    prices = load_prices(prices_path)
    h = spec.hardware
    placements = [(1, 0)]
    if spec.sites is not None:
        links = spec.sites.links or [spec.sites.interconnect.links]
        placements = [(c, 0 if c == 1 else n) for c in spec.sites.count for n in ([0] if c == 1 else links)]
    hardware = tuple(Design(*v, *place) for v in itertools.product(h.gpu, h.nodes, h.nics_per_node,
                                                                   h.nic_speed_gbit_s, h.transport, h.topology,
                                                                   h.oversubscription) for place in placements)
    p = spec.parallel
    layouts = tuple(itertools.product(*(getattr(p, k) for k in PARALLEL_KEYS)))
    syncs = () if spec.sync is None else tuple(Sync.of(x) for x in spec.sync)
    if syncs:
        layouts = tuple((*lay, sync) for lay in layouts for sync in syncs)
    shared = {k: data[k] for k in ("storage", "reliability") if data.get(k) is not None}
    if spec.sites is not None:
        shared["interconnect"] = data["sites"]["interconnect"]
    return Space(spec.name, workload, spec.tokens, prices, hardware, layouts, Limits.of(spec.constraints), shared,
                 read_mapping(workload_path, "workload"), prices_path, syncs)


def load_space(path: Path | str) -> Space:
    """Read, validate and resolve a search file."""
    p = Path(path)
    return space_from_mapping(read_mapping(p), str(p), p.parent)
