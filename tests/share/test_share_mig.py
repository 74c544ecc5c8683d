"""MIG profiles from NVIDIA's MIG user guide: fractions, placements and packing on one GPU."""

from __future__ import annotations

import pytest

from slowlink.errors import SpecError
from slowlink.share import mig
from slowlink.share.alloc import SharedGpus


def test_fractions_are_the_user_guides() -> None:
    # MIG user guide, "Supported MIG Profiles", A100-80GB/H100-80GB tables: Fraction of SMs / of Memory
    p = mig.profiles("h100-sxm")
    expect = {"1g.10gb": (1 / 7, 1 / 8), "1g.20gb": (1 / 7, 2 / 8), "2g.20gb": (2 / 7, 2 / 8),
              "3g.40gb": (3 / 7, 4 / 8), "4g.40gb": (4 / 7, 4 / 8), "7g.80gb": (1.0, 1.0)}
    assert set(p) == set(expect)
    for name, (sms, memory) in expect.items():
        assert (p[name].compute_fraction, p[name].memory_fraction) == pytest.approx((sms, memory)), name
    assert set(mig.profiles("a100-40gb")) == {"1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"}


def test_seven_1g_instances_fit_and_an_eighth_does_not() -> None:
    one = mig.profiles("a100-80gb")["1g.10gb"]
    mask, used = 0, 0
    for _ in range(7):
        m = mig.place(mask, used, one)
        assert m is not None
        mask, used = mask | m, used + 1
    assert mig.place(mask, used, one) is None


def test_4g_and_3g_share_a_gpu_but_two_4g_do_not() -> None:
    p = mig.profiles("a100-80gb")
    m4 = mig.place(0, 0, p["4g.40gb"])
    assert m4 == 0x0F
    assert mig.place(m4, 4, p["3g.40gb"]) == 0xF0
    assert mig.place(m4, 4, p["4g.40gb"]) is None


def test_smallest_fitting_profile() -> None:
    assert mig.smallest_fitting("h100-sxm", 0.25, 0.1).name == "2g.20gb"
    assert mig.smallest_fitting("h100-sxm", 0.1, 0.2).name == "1g.20gb"
    assert mig.smallest_fitting("h100-sxm", 1.0, 0.0).name == "7g.80gb"


def test_a_gpu_without_mig_is_a_spec_error() -> None:
    with pytest.raises(SpecError, match=r"cluster.gpu \('b200'\).*mig"):
        mig.profiles("b200")


def test_time_slice_shares_are_max_min_fair() -> None:
    gpus = SharedGpus(1, 1, "timeslice", "h100-sxm", 80e9, 4)
    gpus.gpus[0].residents = {"small": (0.2, 0.0), "big1": (1.0, 0.0), "big2": (1.0, 0.0)}
    assert gpus.shares(0) == pytest.approx({"small": 0.2, "big1": 0.4, "big2": 0.4})
