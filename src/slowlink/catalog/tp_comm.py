"""Named Transformer Engine userbuffers configs (``overlap.tp_comm_config``): per TP GEMM, the overlap method, the
SMs its communication holds and whether the GEMM leaves them free, the pipeline's chunks and the ring exchange's
aggregation, as ``initialize_ub`` takes them. The configs, each with its source, are in ``data/tp_comm_configs.yaml``;
a config lists what it changes and is merged over TE's defaults (``te-v1.13-default``) as TE merges ``ub_cfgs``."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal, get_args

from pydantic import BaseModel, Field, model_validator

from slowlink.catalog.store import nearest
from slowlink.errors import SpecError
from slowlink.fileio import SPEC_CONFIG, parse_text, validated

DEFAULT = "te-v1.13-default"
DATA_FILE = "tp_comm_configs.yaml"
GemmName = Literal["qkv_fprop", "fc1_fprop", "proj_dgrad", "fc2_dgrad", "proj_fprop", "fc2_fprop",
                   "qkv_dgrad", "qkv_wgrad", "fc1_dgrad", "fc1_wgrad"]
Method = Literal["ring_exchange", "pipeline", "bulk"]


class _GemmEntry(BaseModel):
    model_config = SPEC_CONFIG
    method: Method = Field(description="TE overlap method of this GEMM.")
    num_sm: int = Field(ge=1, description="SMs (CTAs) the communication kernels of this GEMM hold.")
    set_sm_margin: bool = Field(description="The GEMM runs on sm_count - num_sm SMs, leaving the rest to the comm.")
    num_splits: int | None = Field(None, ge=2, description="Row chunks of a pipeline GEMM (pipeline only).")
    aggregate: bool = Field(False, description="Ring exchange in 2x chunks after one exposed 1x exchange.")

    @model_validator(mode="after")
    def _fields_of_the_method(self) -> _GemmEntry:
        if self.method == "pipeline" and self.num_splits is None:
            raise ValueError("num_splits (None): a pipeline GEMM needs its chunk count")
        if self.method != "pipeline" and self.num_splits is not None:
            raise ValueError(f"num_splits ({self.num_splits}) is for the pipeline method only: TE runs "
                             f"{self.method} in tp chunks (ring_exchange) or one (bulk)")
        if self.aggregate and self.method != "ring_exchange":
            raise ValueError(f"aggregate (True) is for the ring_exchange method only, not {self.method}")
        return self


class _ConfigEntry(BaseModel):
    model_config = SPEC_CONFIG
    source: str = Field(min_length=1, description="Where the config is set: repository, commit, file, key.")
    gemms: dict[GemmName, dict[str, Any]] = Field(description="Per GEMM, the keys this config sets.")


@dataclass(frozen=True)
class GemmOverlap:
    """How TE overlaps one GEMM with its TP collective."""

    method: Method
    num_sm: int
    set_sm_margin: bool
    num_splits: int | None
    aggregate: bool


@dataclass(frozen=True)
class TpCommConfig:
    name: str
    source: str
    gemms: dict[str, GemmOverlap]


def _gemm(base: dict[str, Any], given: dict[str, Any], where: str) -> GemmOverlap:
    """One GEMM's entry: ``given`` over ``base`` (TE's ``ub_cfg.update``), validated."""
    e = validated(_GemmEntry, {**base, **given}, where, "workload")
    return GemmOverlap(e.method, e.num_sm, e.set_sm_margin, e.num_splits, e.aggregate)


def parse_configs(data: Any, source: str) -> dict[str, TpCommConfig]:
    """Validate the configs file (parsed): every entry merged over :data:`DEFAULT`, each GEMM with the method TE's
    default gives it (the only schedule :mod:`slowlink.workload.tp_overlap` prices for that GEMM)."""
    if not isinstance(data, dict) or DEFAULT not in data:
        raise SpecError(f"{source}: (top level): must map config names to configs and hold {DEFAULT!r}")
    out: dict[str, TpCommConfig] = {}
    base: dict[GemmName, dict[str, Any]] = {}
    for name in [DEFAULT, *[n for n in data if n != DEFAULT]]:
        entry = validated(_ConfigEntry, data[name], f"{source}: {name}", "workload")
        if name == DEFAULT:
            base = entry.gemms
        gemms = {g: _gemm(base.get(g, {}), entry.gemms.get(g, {}), f"{source}: {name}.gemms.{g}")
                 for g in get_args(GemmName)}
        for g, e in gemms.items():
            want = base[g]["method"]
            if e.method != want:
                raise SpecError(f"{source}: {name}.gemms.{g}.method ({e.method!r}): must be {want!r}, the only "
                                "schedule slowlink prices for this GEMM (TE's default)")
        out[name] = TpCommConfig(name, entry.source, gemms)
    return out


@functools.cache
def tp_comm_configs() -> dict[str, TpCommConfig]:
    """Every bundled config by name."""
    text = (resources.files("slowlink.catalog") / "data").joinpath(DATA_FILE).read_text("utf-8")
    return parse_configs(parse_text(text, DATA_FILE, as_json=False), DATA_FILE)


def tp_comm_config(name: str) -> TpCommConfig:
    """One config; an unknown name lists the nearest ones."""
    known = tp_comm_configs()
    if name not in known:
        raise SpecError(f"overlap.tp_comm_config ({name!r}) is not a known userbuffers config "
                        f"(catalog/data/{DATA_FILE}){nearest(name, list(known))}")
    return known[name]
