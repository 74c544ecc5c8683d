"""A GPU as the models see it: peak dense tensor throughput per precision, HBM size and bandwidth."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from slowlink import units
from slowlink.errors import SpecError


class GpuEntry(BaseModel):
    """One GPU in a catalog file (units as written by vendors' datasheets)."""

    model_config = ConfigDict(extra="forbid")

    bf16_tflops: float = Field(gt=0, description="Peak dense BF16 tensor throughput, TFLOP/s.")
    fp16_tflops: float = Field(gt=0, description="Peak dense FP16 tensor throughput, TFLOP/s.")
    fp8_tflops: float | None = Field(None, gt=0, description="Peak dense FP8 throughput, TFLOP/s; null if none.")
    fp32_tflops: float = Field(gt=0, description="Peak FP32 (non-tensor) throughput, TFLOP/s.")
    hbm_gib: float = Field(gt=0, description="HBM capacity, GiB.")
    hbm_gbyte_s: float = Field(gt=0, description="HBM bandwidth, GB/s.")
    arch: str = Field(description="Architecture family, e.g. ampere, hopper, blackwell, cdna3.")
    sms: int = Field(100, ge=1, description="Streaming multiprocessors (CUs): the width of one GEMM wave.")
    gemm_fraction: float = Field(
        0.85, gt=0, le=1, description="Share of the FP16/BF16 peak a large square GEMM sustains (clock and "
        "power limits), as measured with cuBLAS/hipBLASLt.")
    gemm_fp8_fraction: float = Field(
        0.7, gt=0, le=1, description="The same for FP8 GEMMs (the GEMM alone: the recipe's quantization passes are "
        "priced apart, slowlink.workload.fp8).")
    elementwise_gbyte_s: float | None = Field(
        None, gt=0, description="Bytes read + written per second of the layer's elementwise kernels (LayerNorm, "
        "GeLU, residual add), as `slowlink bench compute` measures them, GB/s; null: hbm_gbyte_s (on a GPU "
        "those kernels are memory bound; on a CPU thread GeLU and LayerNorm are compute bound).")
    adam_ns_per_param: float | None = Field(
        None, gt=0, description="Nanoseconds per parameter of one AdamW step (torch, fp32 states), as `slowlink "
        "bench compute` measures it; null: the step model's bytes per parameter over hbm_gbyte_s.")
    gemm_k_half: float | None = Field(
        None, ge=0, description="Inner dimension k at which a GEMM reaches half its rate, as `slowlink bench "
        "compute` measures it; null: the step model's K_HALF for GPUs (slowlink.workload.compute).")
    host_link: str | None = Field(
        None, description="The GPU's own link to its host CPU, a scale-up catalog name (e.g. pcie-gen5): what a "
        "device-to-host copy crosses, and the most a NIC behind the same x16 slot can carry; null if unknown.")
    scale_up: str | None = Field(
        None, description="The scale-up link of the GPU's own baseboard or rack (HGX/DGX, NVL72, the MI300X "
        "platform), a scale-up catalog name: what `slowlink init` writes into a new cluster file; null: pcie-gen5.")


@dataclass(frozen=True)
class Gpu:
    """A GPU in SI units."""

    name: str
    peak_flops: dict[str, float]
    hbm_bytes: float
    hbm_bw_bytes_s: float
    arch: str
    sms: int = 100
    gemm_fraction: dict[str, float] | None = None
    gemm_k_half: float | None = None
    elementwise_bw: float | None = None  # bytes/s; None: hbm_bw_bytes_s
    adam_s_per_param: float | None = None  # seconds; None: the step model's memory-bound optimizer term
    host_link: str | None = None  # scale-up catalog name of the GPU's link to the host CPU
    scale_up: str | None = None  # scale-up catalog name of the link its own baseboard or rack ships with

    @classmethod
    def from_entry(cls, name: str, entry: GpuEntry) -> Gpu:
        peaks = {"bf16": entry.bf16_tflops, "fp16": entry.fp16_tflops, "fp32": entry.fp32_tflops}
        if entry.fp8_tflops is not None:
            peaks["fp8"] = entry.fp8_tflops
        return cls(
            name=name,
            peak_flops={k: v * units.TFLOPS for k, v in peaks.items()},
            hbm_bytes=entry.hbm_gib * units.GiB,
            hbm_bw_bytes_s=entry.hbm_gbyte_s * units.GB,
            arch=entry.arch,
            sms=entry.sms,
            gemm_fraction={"bf16": entry.gemm_fraction, "fp16": entry.gemm_fraction,
                           "fp8": entry.gemm_fp8_fraction, "fp32": entry.gemm_fraction},
            gemm_k_half=entry.gemm_k_half,
            elementwise_bw=None if entry.elementwise_gbyte_s is None else entry.elementwise_gbyte_s * units.GB,
            adam_s_per_param=None if entry.adam_ns_per_param is None else entry.adam_ns_per_param * units.NS,
            host_link=entry.host_link,
            scale_up=entry.scale_up,
        )

    def peak(self, precision: str) -> float:
        """Peak dense FLOP/s for ``precision`` (bf16, fp16, fp8, fp32)."""
        if precision not in self.peak_flops:
            raise SpecError(
                f"precision ({precision!r}) is not supported by gpu {self.name}: "
                f"it has {', '.join(sorted(self.peak_flops))}"
            )
        return self.peak_flops[precision]

    def gemm_share(self, precision: str) -> float:
        """The measured share of the peak a large square GEMM sustains in ``precision`` (the entry's default
        where the catalog gives none for it)."""
        return float((self.gemm_fraction or {}).get(precision, GpuEntry.model_fields["gemm_fraction"].default))

    def sustained(self, precision: str) -> float:
        """FLOP/s a large square GEMM sustains in ``precision``: peak x the measured GEMM fraction."""
        return self.peak(precision) * self.gemm_share(precision)
