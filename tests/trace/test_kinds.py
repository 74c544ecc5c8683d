"""HTA's kernel kinds by name, and the interval arithmetic every time of a rank is made of."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from slowlink.trace import kinds


@pytest.mark.parametrize(("name", "kind"), [
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", kinds.COMMUNICATION),
    ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", kinds.COMMUNICATION),
    ("void ncclKernel_something<int>()", kinds.COMMUNICATION),  # HTA 0.6: '.*ncclKernel.*'
    ("Memcpy HtoD (Pageable -> Device)", kinds.MEMORY),
    ("Memset (Device)", kinds.MEMORY),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", kinds.COMPUTATION),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", kinds.COMPUTATION),
    ("void dpsk::ep::internode::dispatch<false, 8, true, 8>(int4*, float*)", kinds.COMPUTATION),  # as HTA: no nccl
    ("Stream Sync", kinds.OTHER),
    ("cudaLaunchKernel", kinds.OTHER),
])
def test_kernel_kind_is_htas(name: str, kind: str) -> None:
    assert kinds.kernel_kind(name) == kind


_intervals = st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 200)), max_size=40)


def _arrays(ivs: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    s = np.array([a for a, _ in ivs], dtype=np.float64)
    return s, s + np.array([d for _, d in ivs], dtype=np.float64)


def _covered(ivs: list[tuple[int, int]]) -> set[int]:
    return {t for a, d in ivs for t in range(a, a + d)}


@given(_intervals, _intervals)
def test_union_and_overlap_count_each_instant_once(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> None:
    ua, ub = kinds.merged(*_arrays(a)), kinds.merged(*_arrays(b))
    assert kinds.length(ua) == len(_covered(a))
    assert kinds.overlap(ua, ub) == pytest.approx(len(_covered(a) & _covered(b)))
    assert np.all(ua[0][1:] > ua[1][:-1])  # disjoint and sorted
