"""A kernel's rate on a GPU at the shape a trace recorded: measured where a published table covers the GPU's
architecture (``data/kernel_rates.yaml``: XLA's sm_90 GEMM table, FlashAttention-2's A100 and H100 benchmarks),
the step model's otherwise (:func:`slowlink.workload.compute.gemm_time_s`). Each answer says which.

  GEMM (m, n, k, batch) on a GPU of a tabled arch and precision:
      rate = table rate at the nearest tabled shape / peak(table GPU) x peak(GPU)
             x model rate(shape) / model rate(nearest tabled shape)
    exact at a tabled shape; between shapes the step model's shape dependence (wave quantisation, short inner
    dimension, roofline) carries it from the nearest one (nearest: least summed |log| of the b*m, n, k ratios)
  attention (batch, heads, seq, head dim): the tabled rate at the nearest tabled sequence length and that head dim,
    as a share of the table GPU's peak, at the GPU's peak; None where no table covers it
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from importlib import resources

import yaml
from pydantic import BaseModel, ConfigDict, Field

from slowlink.catalog import Gpu, load_catalog
from slowlink.fileio import validated
from slowlink.workload.compute import Gemm, gemm_time_s


class _RateTable(BaseModel):
    """What every measured table says of itself: its name, source, and the GPU its rates were measured on."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="The table's name.")
    source: str = Field(description="Where its numbers were read.")
    arch: str = Field(description="The catalog arch the table applies to.")
    gpu: str = Field(description="The catalog GPU whose peak its rates are a share of.")


class GemmTableEntry(_RateTable):
    """Measured GEMM rates by shape on one GPU."""

    precisions: list[str] = Field(description="Precisions it applies to.")
    rows: list[tuple[float, float, float, float, float]] = Field(description="[b, m, n, k, TFLOP/s] rows.")


class AttentionTableEntry(_RateTable):
    """Measured attention rates by sequence length and head dimension on one GPU."""

    seqlens: list[int] = Field(description="Sequence lengths of the columns.")
    tflops: dict[int, list[float | None]] = Field(description="Head dim -> TFLOP/s per sequence length.")


class KernelRates(BaseModel):
    """The bundled tables (``data/kernel_rates.yaml``)."""

    model_config = ConfigDict(extra="forbid")

    gemm: list[GemmTableEntry] = Field(description="GEMM tables.")
    attention: list[AttentionTableEntry] = Field(description="Attention tables.")


@functools.cache
def tables() -> KernelRates:
    """The bundled kernel-rate tables, validated."""
    text = (resources.files("slowlink.trace") / "data" / "kernel_rates.yaml").read_text("utf-8")
    return validated(KernelRates, yaml.safe_load(text), "trace/data/kernel_rates.yaml", "kernel rates")


@functools.cache
def _peak(gpu: str, precision: str) -> float:
    return load_catalog().gpu(gpu).peak(precision)


@dataclass(frozen=True)
class Rate:
    """FLOP/s of a kernel at one shape on one GPU, and where the number comes from."""

    flops_s: float
    source: str


def _distance(a: Gemm, b: Gemm) -> float:
    return sum(abs(math.log(x / y)) for x, y in ((a.m * a.batch, b.m * b.batch), (a.n, b.n), (a.k, b.k)))


def gemm_rate(g: Gemm, gpu: Gpu, precision: str) -> Rate:
    """FLOP/s of GEMM ``g`` on ``gpu`` in ``precision`` (module docstring)."""
    model = g.flops / gemm_time_s(g, gpu, precision)
    for t in tables().gemm:
        if t.arch == gpu.arch and precision in t.precisions:
            rows = [(Gemm(m, n, k, b), tf * 1e12) for b, m, n, k, tf in t.rows]
            anchor, rate = min(rows, key=lambda r: _distance(g, r[0]))
            at_anchor = anchor.flops / gemm_time_s(anchor, gpu, precision)
            share = rate / _peak(t.gpu, precision)
            return Rate(share * gpu.peak(precision) * model / at_anchor,
                        f"{t.id} at b{anchor.batch:g} m{anchor.m:g} n{anchor.n:g} k{anchor.k:g}, carried to this "
                        "shape by the step model")
    return Rate(model, "the step model (peak x GEMM fraction, wave quantisation, inner dimension, roofline)")


def attention_rate(seq: float, head_dim: float, gpu: Gpu, precision: str) -> Rate | None:
    """FLOP/s of FlashAttention-2's forward + backward at ``seq`` and ``head_dim`` on ``gpu``, or None where no
    table covers the GPU's arch and that head dim."""
    for t in tables().attention:
        col = t.tflops.get(int(head_dim))
        if t.arch != gpu.arch or col is None:
            continue
        known = [(s, r) for s, r in zip(t.seqlens, col, strict=True) if r is not None]
        s, r = min(known, key=lambda x: abs(math.log(x[0] / seq)))
        return Rate(r * 1e12 / _peak(t.gpu, precision) * gpu.peak(precision), f"{t.id} at seqlen {s}, hd {head_dim:g}")
    return None
