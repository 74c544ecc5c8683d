"""A storage server on the emulated cluster, and a checkpoint written to it during a gloo all_reduce: measured
slowdown of the all_reduce over the compute NICs (converged) and over storage NICs of their own (separate),
beside the flow model's (:func:`slowlink.storage.converged.checkpoint_slowdown`).

The storage server is one more namespace, ``sl-<run>-st``: converged, it hangs off the compute switch (port
``pst``, address ``10.213.0.200``) on a link of ``storage_rate`` (the storage's write bandwidth, one target);
separate, it holds a bridge of its own to which every node's storage NIC (``st0``, ``10.214.0.<k+1>``) is
linked at the NIC rate. Every link is shaped with the emulation's tbf. The server accepts one TCP stream per
node and writes what it receives into a file (fsync'ed at the end); during the measurement each node streams
a checkpoint to it without pause, so the burst covers every timed all_reduce. The model is given the same
cluster at the emulated rates and a checkpoint too long to end before the all_reduce does.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from slowlink import units
from slowlink.emulate import net
from slowlink.emulate.measure import collective
from slowlink.emulate.plan import Plan, build_plan
from slowlink.errors import EmulationError
from slowlink.spec.cluster import Cluster, cluster_from_mapping
from slowlink.storage.converged import checkpoint_slowdown

PORT = 29611
SERVER = "10.213.0.200"
SEPARATE_SERVER = "10.214.0.200"
# A TCP sink: one thread per connection writes what arrives to its own file, fsync'ed when the stream ends.
_SINK = r"""
import os, socket, sys, threading
out, port = sys.argv[1], int(sys.argv[2])
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); srv.bind(("0.0.0.0", port))
srv.listen(16); print("ready", flush=True)
def take(conn, k):
    with open(os.path.join(out, f"ckpt{k}.bin"), "wb") as f:
        while data := conn.recv(1 << 20):
            f.write(data)
        f.flush(); os.fsync(f.fileno())
k = 0
while True:
    c, _ = srv.accept(); threading.Thread(target=take, args=(c, k), daemon=True).start(); k += 1
"""
# A checkpoint writer: streams random bytes to the server until killed.
_WRITER = r"""
import os, socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
buf = os.urandom(1 << 20)
while True:
    s.sendall(buf)
"""


@dataclass(frozen=True)
class FabricRun:
    """One fabric: the all_reduce's median time alone and during the checkpoint, and the model's slowdown."""

    fabric: str
    alone_s: float
    with_checkpoint_s: float
    predicted_slowdown: float

    @property
    def slowdown(self) -> float:
        return self.with_checkpoint_s / self.alone_s

    @property
    def error(self) -> float:
        """(predicted - measured) / measured slowdown."""
        return self.predicted_slowdown / self.slowdown - 1.0

    def to_json(self) -> dict[str, object]:
        return {"fabric": self.fabric, "allreduce_alone_s": self.alone_s,
                "allreduce_with_checkpoint_s": self.with_checkpoint_s, "slowdown": self.slowdown,
                "predicted_slowdown": self.predicted_slowdown, "error": self.error}


def model_cluster(converged: bool, nic_gbit_s: float, storage_gbyte_s: float) -> Cluster:
    """Two one-GPU nodes on one switch at the emulated rates, with storage converged or separate."""
    return cluster_from_mapping({
        "name": "emulated-storage", "nodes": 2, "gpus_per_node": 1, "gpu": "h100-sxm",
        "scale_up": {"link": "nvlink4", "domain_gpus": 1},
        "nics": {"compute": {"per_node": 1, "speed_gbit_s": nic_gbit_s},
                 "storage": {"per_node": 1, "speed_gbit_s": nic_gbit_s}},
        "fabric": {"transport": "roce", "topology": "single-switch"},
        "storage": {"system": "nfs", "shared_with_compute": converged, "read_gbyte_s": storage_gbyte_s,
                    "write_gbyte_s": storage_gbyte_s, "metadata_ops_s": 1000, "targets": 1}})


def _link(plan: Plan, a: str, dev_a: str, b: str, dev_b: str, rate_bytes_s: float) -> None:
    bits = max(8000, round(rate_bytes_s * 8))
    net.sh("ip", "link", "add", "name", dev_a, "netns", a, "type", "veth", "peer", "name", dev_b, "netns", b)
    for ns, dev in ((a, dev_a), (b, dev_b)):
        net.tc_batch(ns, [f"qdisc add dev {dev} root tbf rate {bits}bit burst {net.TBF_BURST} "
                          f"latency {net.TBF_LATENCY}"])
        net.nsx(ns, "ip", "link", "set", dev, "up")


def attach_storage(plan: Plan, converged: bool, storage_rate_bytes_s: float) -> str:
    """Add the storage server namespace (module docstring); its address."""
    st = plan.ns("st")
    net._new_ns(st)
    if converged:
        sw = plan.switches[0]
        _link(plan, st, "eth0", sw, "pst", storage_rate_bytes_s)
        net.nsx(sw, "ip", "link", "set", "pst", "master", "br0")
        net.nsx(st, "ip", "addr", "add", f"{SERVER}/24", "dev", "eth0")
        return SERVER
    net.nsx(st, "ip", "link", "add", "sbr", "type", "bridge", "stp_state", "0")
    net.nsx(st, "ip", "link", "set", "sbr", "up")
    for k, node in enumerate(plan.nodes):
        _link(plan, node, "st0", st, f"s{k}", plan.node_rate_bytes_s)
        net.nsx(st, "ip", "link", "set", f"s{k}", "master", "sbr")
        net.nsx(node, "ip", "addr", "add", f"10.214.0.{k + 1}/24", "dev", "st0")
    net.nsx(st, "ip", "addr", "add", f"{SEPARATE_SERVER}/24", "dev", "sbr")
    return SEPARATE_SERVER


def share_fairly(plan: Plan, server: str) -> None:
    """Replace each node's compute-NIC FIFO (tbf) with two HTB classes of half the rate each, borrowing up to
    the whole rate: compute traffic and traffic to ``server``. The traffic classes of a converged RoCE fabric
    (IEEE 802.1Qaz ETS) share a port this way; in one FIFO a bulk TCP stream keeps the queue full and gloo's
    ring waits behind it."""
    bits = max(8000, round(plan.node_rate_bytes_s * 8))
    for node in plan.nodes:
        net.tc_batch(node, [
            "qdisc del dev eth0 root",
            "qdisc add dev eth0 root handle 1: htb default 10",
            f"class add dev eth0 parent 1: classid 1:1 htb rate {bits}bit ceil {bits}bit quantum 1514",
            f"class add dev eth0 parent 1:1 classid 1:10 htb rate {bits // 2}bit ceil {bits}bit quantum 1514",
            f"class add dev eth0 parent 1:1 classid 1:20 htb rate {bits // 2}bit ceil {bits}bit quantum 1514",
            f"filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst {server}/32 flowid 1:20"])


def _popen(ns: str, code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", code, *args], text=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def measure_fabric(run_id: str, converged: bool, size_bytes: float, iters: int, scale: float,
                   nic_gbit_s: float = 25.0, fair: bool = False) -> FabricRun:
    """Build the emulation, time the all_reduce alone and during the checkpoint, tear everything down;
    ``fair``: converged ports share by traffic class (:func:`share_fairly`) instead of one FIFO."""
    emu = model_cluster(converged, nic_gbit_s, 2 * nic_gbit_s * units.Gbit / units.GB)
    plan = build_plan(emu, scale=scale, run_id=run_id)
    storage_rate = emu.storage.write_bytes_s * scale if emu.storage else 0.0
    procs: list[subprocess.Popen[str]] = []
    try:
        net.up_owned(plan)
        server = attach_storage(plan, converged, storage_rate)
        if fair and converged:
            share_fairly(plan, server)
        with tempfile.TemporaryDirectory(prefix="slowlink-store-") as store:
            sink = _popen(plan.ns("st"), _SINK, store, str(PORT))
            procs.append(sink)
            if sink.stdout is None or sink.stdout.readline().strip() != "ready":
                raise EmulationError("the storage server did not start")
            alone = statistics.median(collective(plan, "all_reduce", size_bytes, iters))
            procs += [_popen(node, _WRITER, server, str(PORT)) for node in plan.nodes]
            time.sleep(1.0)  # TCP slow start of the checkpoint streams
            during = statistics.median(collective(plan, "all_reduce", size_bytes, iters, timeout_s=600))
            if any(p.poll() is not None for p in procs):
                raise EmulationError("a checkpoint stream ended before the all_reduce did")
    finally:
        for p in procs:
            p.kill()
        net.down(plan.run_id)
    model = model_cluster(converged, nic_gbit_s * scale, emu.storage.write_bytes_s * scale / units.GB
                          if emu.storage else 1.0)
    pred = checkpoint_slowdown(model, 1000 * size_bytes, size_bytes)
    name = ("converged, fair classes" if fair else "converged, one FIFO") if converged else "separate"
    return FabricRun(name, alone, during, pred.slowdown)
