"""The long haul's rate: a window-limited stream runs at window / RTT, loss lowers a TCP stream by Mathis et al.
1997 and an RDMA one by go-back-N, streams add up to the line rate."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from slowlink import units
from slowlink.sites.transport import (
    egress_rate_bytes_s,
    go_back_n_efficiency,
    mathis_rate_bytes_s,
    stream_rate_bytes_s,
    window_rate_bytes_s,
)
from slowlink.spec.sites import Interconnect

# 2 x 400 Gbit/s, 10 ms round trip (~1,000 km of fibre), one 64 MiB window per stream, MSS 1448 B.
IC = Interconnect(links=2, link_bytes_s=400 * units.Gbit, rtt_s=0.010, loss=0.0, transport="tcp",
                  window_bytes=64 * units.MiB, segment_bytes=1448.0, streams_per_connection=1)


def test_a_window_limited_flow_runs_at_window_over_rtt() -> None:
    # 64 MiB / 10 ms = 6.71 GB/s, below the 100 GB/s line: the window is the limit
    assert window_rate_bytes_s(64 * units.MiB, 0.010) == pytest.approx(67108864 / 0.010)
    assert stream_rate_bytes_s(IC, IC.egress_bytes_s) == pytest.approx(67108864 / 0.010)
    assert window_rate_bytes_s(1.0, 0.0) == math.inf  # no round trip, no window limit


def test_loss_lowers_a_tcp_flow_by_mathis() -> None:
    # Mathis et al. 1997: MSS / RTT x sqrt(3/2) / sqrt(p); 1448 B, 10 ms, p = 1e-4 -> 17.73 MB/s
    lossy = replace(IC, loss=1e-4)
    expected = 1448 / 0.010 * math.sqrt(1.5) / math.sqrt(1e-4)
    assert expected == pytest.approx(17.734e6, rel=1e-4)
    assert mathis_rate_bytes_s(1448, 0.010, 1e-4) == pytest.approx(expected)
    assert stream_rate_bytes_s(lossy, IC.egress_bytes_s) == pytest.approx(expected)
    # four times the loss halves the rate; twice the round trip halves it too
    assert mathis_rate_bytes_s(1448, 0.010, 4e-4) == pytest.approx(expected / 2)
    assert mathis_rate_bytes_s(1448, 0.020, 1e-4) == pytest.approx(expected / 2)
    assert mathis_rate_bytes_s(1448, 0.010, 0.0) == math.inf


def test_parallel_streams_add_up_to_the_line() -> None:
    one = stream_rate_bytes_s(IC, IC.egress_bytes_s)
    assert egress_rate_bytes_s(IC, 4) == pytest.approx(4 * one)
    assert egress_rate_bytes_s(replace(IC, streams_per_connection=4), 2) == pytest.approx(8 * one)
    assert egress_rate_bytes_s(IC, 1000) == pytest.approx(IC.egress_bytes_s)  # 15 windows fill 100 GB/s


def test_rdma_loses_to_go_back_n() -> None:
    # Stallings Sec. 7.3: (1 - p) / (1 + 2 a p), a = 5 ms / (4096 B at 50 GB/s) = 61,035 packets
    a = 0.005 / (4096 / (400 * units.Gbit))
    assert go_back_n_efficiency(1e-5, 0.010, 4096, 400 * units.Gbit) == pytest.approx((1 - 1e-5) / (1 + 2 * a * 1e-5))
    rdma = replace(IC, transport="rdma", window_bytes=None, segment_bytes=4096.0, loss=1e-5)
    assert egress_rate_bytes_s(rdma, 1) == pytest.approx(IC.egress_bytes_s * (1 - 1e-5) / (1 + 2 * a * 1e-5))
    assert egress_rate_bytes_s(replace(rdma, loss=0.0), 1) == IC.egress_bytes_s
