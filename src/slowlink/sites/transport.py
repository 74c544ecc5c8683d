"""What a long fat pipe carries: a stream's rate under its window, its loss and the line, and a site's egress.

A stream's rate is the least of three limits:
  window  W / RTT                                  (at most one window in flight per round trip)
  loss    TCP:  MSS / RTT x C / sqrt(p), C = sqrt(3/2)   (Mathis, Semke, Mahdavi, Ott 1997, "The Macroscopic
                Behavior of the TCP Congestion Avoidance Algorithm", CCR 27(3), eq. 3: periodic loss, no delayed
                ACKs)
          RDMA: line x (1 - p) / (1 + 2 a p)       (go-back-N with a window covering the pipe, a = one-way
                propagation / one packet's serialisation: Stallings, "Data and Computer Communications", Sec. 7.3
                ARQ performance; RoCE NICs retransmit go-back-N, InfiniBand Architecture Specification 9.7.5)
  line    the egress's line rate / streams sharing it
and a site's egress carries the sum of its streams' rates, never more than its line rate.
"""

from __future__ import annotations

import math

from slowlink.spec.sites import Interconnect

MATHIS_C = math.sqrt(1.5)  # Mathis et al. 1997: C = sqrt(3/2) for periodic loss, one ACK per segment


def window_rate_bytes_s(window_bytes: float, rtt_s: float) -> float:
    """A window-limited stream's rate: ``window / RTT`` (inf at RTT 0)."""
    return math.inf if rtt_s <= 0 else window_bytes / rtt_s


def mathis_rate_bytes_s(mss_bytes: float, rtt_s: float, loss: float) -> float:
    """A loss-limited TCP stream's rate, Mathis et al. 1997: ``MSS / RTT x sqrt(3/2) / sqrt(p)`` (inf without
    loss or at RTT 0)."""
    if loss <= 0 or rtt_s <= 0:
        return math.inf
    return mss_bytes / rtt_s * MATHIS_C / math.sqrt(loss)


def go_back_n_efficiency(loss: float, rtt_s: float, packet_bytes: float, line_bytes_s: float) -> float:
    """Share of the line a go-back-N sender keeps busy at packet loss ``p`` (Stallings, Sec. 7.3):
    ``(1 - p) / (1 + 2 a p)``, ``a`` = one-way propagation (RTT / 2) over one packet's serialisation time."""
    if loss <= 0:
        return 1.0
    a = (rtt_s / 2.0) / (packet_bytes / line_bytes_s)
    return (1.0 - loss) / (1.0 + 2.0 * a * loss)


def stream_rate_bytes_s(ic: Interconnect, line_share_bytes_s: float) -> float:
    """One stream's rate over ``ic`` when the line gives it ``line_share_bytes_s``: the least of its window, its
    loss limit and that share (module docstring)."""
    window = math.inf if ic.window_bytes is None else window_rate_bytes_s(ic.window_bytes, ic.rtt_s)
    if ic.transport == "tcp":
        loss = mathis_rate_bytes_s(ic.segment_bytes, ic.rtt_s, ic.loss)
    else:
        loss = line_share_bytes_s * go_back_n_efficiency(ic.loss, ic.rtt_s, ic.segment_bytes, ic.link_bytes_s)
    return min(window, loss, line_share_bytes_s)


def egress_rate_bytes_s(ic: Interconnect, connections: int) -> float:
    """What one site's egress carries with ``connections`` cross-site connections at once, each opening
    ``streams_per_connection`` streams: streams x one stream's rate, at most the line rate."""
    streams = max(1, connections) * ic.streams_per_connection
    line = ic.egress_bytes_s
    return min(line, streams * stream_rate_bytes_s(ic, line / streams))
