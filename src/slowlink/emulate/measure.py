"""Bounded TCP throughput between node namespaces, with plain Python sockets (a script per endpoint)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from slowlink.emulate.net import sh
from slowlink.emulate.plan import Plan
from slowlink.errors import EmulationError

_SERVER = """
import socket, sys, time, json
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', int(sys.argv[1]))); s.listen(8); print('ready', flush=True)
c, _ = s.accept(); n = 0; t0 = None
while True:
    b = c.recv(1 << 20)
    if not b: break
    if t0 is None: t0 = time.monotonic()
    n += len(b)
print(json.dumps({'bytes': n, 'time_s': time.monotonic() - t0}), flush=True)
"""
_CLIENT = """
import socket, sys, time
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
end = time.monotonic() + float(sys.argv[3]); buf = b'x' * (1 << 16)
while time.monotonic() < end: c.sendall(buf)
c.close()
"""


def throughput(plan: Plan, pairs: list[tuple[int, int]], duration_s: float = 1.5,
               port: int = 5201) -> list[float]:
    """Run one TCP stream per (src, dst) pair at the same time; return each one's bytes/s."""
    servers = []
    for i, (_, dst) in enumerate(pairs):
        p = subprocess.Popen(["ip", "netns", "exec", plan.nodes[dst], sys.executable, "-c", _SERVER,
                              str(port + i)], stdout=subprocess.PIPE, text=True)
        assert p.stdout is not None
        if p.stdout.readline().strip() != "ready":
            raise EmulationError(f"throughput server on node {dst} did not start")
        servers.append(p)
    clients = [subprocess.Popen(["ip", "netns", "exec", plan.nodes[src], sys.executable, "-c", _CLIENT,
                                 plan.addresses[dst], str(port + i), str(duration_s)])
               for i, (src, dst) in enumerate(pairs)]
    rates: list[float] = []
    try:
        for c in clients:
            c.wait(timeout=duration_s + 20)
        for srv in servers:
            out, _ = srv.communicate(timeout=20)
            r = json.loads(out.strip().splitlines()[-1])
            rates.append(r["bytes"] / r["time_s"])
    finally:
        for proc in servers:
            if proc.poll() is None:
                proc.kill()
        for proc in clients:  # type: ignore[assignment]
            if proc.poll() is None:
                proc.kill()
    return rates


_PROBE = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], 9), timeout=float(sys.argv[2])).close()
except ConnectionRefusedError:
    pass
except OSError:
    sys.exit(1)
"""


def ping_ok(plan: Plan, src: int, dst: int, timeout_s: float = 1.0, rail: int = 0) -> bool:
    """Whether node ``src`` reaches ``dst`` on ``rail``: a TCP connect to a closed port answers refused."""
    return sh("ip", "netns", "exec", plan.nodes[src], sys.executable, "-c", _PROBE, plan.address(dst, rail),
              str(timeout_s), check=False).returncode == 0


_RTT = """
import socket, sys, time
best = float('inf')
for _ in range(int(sys.argv[2])):
    t0 = time.monotonic()
    try:
        socket.create_connection((sys.argv[1], 9), timeout=5).close()
    except ConnectionRefusedError:
        pass
    best = min(best, time.monotonic() - t0)
print(best)
"""


def rtt_s(plan: Plan, src: int, dst: int, tries: int = 5) -> float:
    """Smallest of ``tries`` TCP connect round trips (SYN, RST) from node ``src`` to ``dst``, seconds."""
    out = sh("ip", "netns", "exec", plan.nodes[src], sys.executable, "-c", _RTT, plan.addresses[dst],
             str(tries)).stdout
    return float(out.strip())


def collective(plan: Plan, op: str, size_bytes: float, iters: int = 3, timeout_s: float = 120) -> list[float]:
    """Time a gloo ``op`` of ``size_bytes`` across every node namespace; the per-iteration times, seconds."""
    times: list[float] = collective_report(plan, op, size_bytes, iters, timeout_s)["times_s"]
    return times


def collective_report(plan: Plan, op: str, size_bytes: float, iters: int = 3,
                      timeout_s: float = 120) -> dict[str, Any]:
    """Everything :mod:`slowlink.emulate.collective` reports: times, per-rank times, CPU use."""
    import os
    import tempfile

    from slowlink.emulate.net import run

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        codes = run(plan, [sys.executable, "-m", "slowlink.emulate.collective", op, str(size_bytes),
                           str(iters), out], timeout_s=timeout_s)
        if any(codes) or not os.path.exists(out):
            raise EmulationError(f"gloo {op} failed across the emulation (exit codes {codes})")
        with open(out) as f:
            report: dict[str, Any] = json.load(f)
    return report
