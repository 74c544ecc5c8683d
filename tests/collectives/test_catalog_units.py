"""Catalog numbers against their sources' units (issue 13, item 6). Lives here because the collective
model is the catalog's main reader; one test per fact fixed."""

from __future__ import annotations

import pytest

from slowlink import units
from slowlink.catalog import load_catalog


@pytest.mark.parametrize(("gpu", "driver_mib"), [
    ("a100-40gb", 40960), ("a100-80gb", 81920), ("h100-sxm", 81559),  # modal-labs/modal-client PR 2797
    ("h200", 143771),      # nvidia-smi on 8x H200 SXM (public logs)
    ("b200", 183359),      # NVIDIA/TensorRT-LLM issue 10278
    ("gb200", 189471),     # nvidia-smi on GB200 NVL72 trays (public logs)
])
def test_hbm_is_what_the_driver_reports(gpu: str, driver_mib: int) -> None:
    """hbm_gib is nvidia-smi's memory.total: 141 "GB" on an H200 is 140.4 GiB, not 131 GiB."""
    assert load_catalog().gpu(gpu).hbm_bytes == pytest.approx(driver_mib * units.MiB, rel=0.002)


def test_mi300x_hbm_is_what_rocm_smi_reports() -> None:
    assert load_catalog().gpu("mi300x").hbm_bytes == pytest.approx(205822885888, rel=0.002)


def test_tuned_roce_differs_from_ndr_by_framing_only() -> None:
    """RoCEv2 82 bytes vs IB 26 bytes of headers per 4096-byte payload (IBTA): 0.987 x NDR's 0.94."""
    cat = load_catalog()
    framing = (4096 / (4096 + 82)) / (4096 / (4096 + 26))
    assert cat.transport("roce-lossless").efficiency == pytest.approx(cat.transport("ib-ndr").efficiency * framing,
                                                                     abs=0.005)
    assert cat.transport("roce-untuned").efficiency == cat.transport("roce-lossless").efficiency
    assert cat.transport("roce-untuned").tail_penalty == 0.25


@pytest.mark.parametrize(("link", "per_direction_gbyte_s"), [
    ("nvlink3", 300), ("nvlink4", 450), ("nvlink5", 900),   # datasheets' 600 / 900 / 1800 GB/s are both ways
])
def test_nvlink_is_per_direction(link: str, per_direction_gbyte_s: float) -> None:
    assert load_catalog().link(link).bw_bytes_s == per_direction_gbyte_s * units.GB


@pytest.mark.parametrize(("gpu", "dense_bf16_tflops"), [
    ("a100-80gb", 312), ("h100-sxm", 989.4), ("b200", 2250), ("gb200", 2500), ("mi300x", 1307.4),
])
def test_peaks_are_dense_not_sparse(gpu: str, dense_bf16_tflops: float) -> None:
    """Datasheets quote "with sparsity" at twice these; the catalog holds the dense figure."""
    assert load_catalog().gpu(gpu).peak("bf16") == dense_bf16_tflops * units.TFLOPS
