"""A delaying, dropping frame relay: the middle of one emulated link, for kernels without netem.

Run inside a relay namespace that holds two veth ends ``A`` and ``B``:
``python -m slowlink.emulate.relay A B DELAY_S LOSS SEED``. Every frame received on one end is sent out of
the other ``DELAY_S`` later (a FIFO per direction: the delay is constant, so order is kept), or dropped
with probability ``LOSS`` (seeded). ``python -m slowlink.emulate.relay --no-offload DEV...`` turns off
checksum, segmentation and receive offloads on devices of the current namespace, so that the relay sees
whole wire-sized frames with their checksums filled in (no ``ethtool`` binary is needed).

Faithfulness: the delay is propagation delay added after the sender's shaper; the relay adds its own
scheduling jitter: frames are handled in batches every ``TICK_S`` (0.5 ms), so each waits 0-0.5 ms
extra (more when the CPUs are busy) and costs about
one core-percent per thousand frames a second. Frames queue in the relay without limit (no relay loss).
"""

from __future__ import annotations

import collections
import ctypes
import fcntl
import random
import select
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23
SIOCETHTOOL = 0x8946
# Legacy ethtool "set" commands (linux/ethtool.h): tx checksum, scatter-gather, TSO, GSO, GRO.
ETHTOOL_OFFLOADS = (0x17, 0x19, 0x1F, 0x24, 0x2C)
FRAME_MAX = 65536
TICK_S = 0.0005  # batching period: frames wait up to this long extra (mean half)


def no_offload(dev: str) -> None:
    """Turn off tx checksum, SG, TSO, GSO and GRO on ``dev`` (SIOCETHTOOL, struct ethtool_value)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for cmd in ETHTOOL_OFFLOADS:
            value = ctypes.create_string_buffer(struct.pack("II", cmd, 0))
            ifreq = struct.pack("16sP", dev.encode(), ctypes.addressof(value)) + b"\0" * 16
            fcntl.ioctl(s.fileno(), SIOCETHTOOL, ifreq)


def _socket(dev: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 << 20)
    s.bind((dev, 0))
    s.setblocking(False)
    return s


def relay(dev_a: str, dev_b: str, delay_s: float, loss: float, seed: int) -> None:
    """Forward frames between ``dev_a`` and ``dev_b`` forever, each ``delay_s`` late or dropped."""
    rng = random.Random(seed)
    a, b = _socket(dev_a), _socket(dev_b)
    out = {a.fileno(): b, b.fileno(): a}
    queues: dict[int, collections.deque[tuple[float, bytes]]] = {a.fileno(): collections.deque(),
                                                                 b.fileno(): collections.deque()}
    print("ready", flush=True)
    while True:
        for s in (a, b):
            q = queues[s.fileno()]
            while True:
                try:
                    frame = s.recv(FRAME_MAX)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:
                    time.sleep(TICK_S)  # our own end is down; wait for it to come back
                    break
                if not loss or rng.random() >= loss:
                    q.append((time.monotonic() + delay_s, frame))
        now = time.monotonic()
        for fd, q in queues.items():
            while q and q[0][0] <= now:
                try:
                    out[fd].send(q[0][1])
                except BlockingIOError:
                    break
                except OSError:
                    pass  # the far end is down: the frame is lost, as on a cut cable
                q.popleft()
        due = [q[0][0] for q in queues.values() if q]
        if due:  # sleep in ticks so that frames are handled in batches, not one wake-up each
            time.sleep(min(TICK_S, max(0.0, min(due) - time.monotonic())))
        else:
            select.select([a, b], [], [])


def main(argv: list[str]) -> None:
    if argv and argv[0] == "--no-offload":
        for dev in argv[1:]:
            no_offload(dev)
        return
    dev_a, dev_b, delay_s, loss, seed = argv[0], argv[1], float(argv[2]), float(argv[3]), int(argv[4])
    relay(dev_a, dev_b, delay_s, loss, seed)


if __name__ == "__main__":
    main(sys.argv[1:])
