"""Building, using and removing the emulated cluster with ``ip`` and ``tc`` (needs root).

Every namespace is named ``sl-<run id>-...``; veth pairs are created directly inside their namespaces,
so nothing is ever added to the host's own namespace. A state file in ``/run/slowlink-emulate`` lists
what was made; ``down`` removes it, and a prefix sweep removes anything left by a crashed run.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
from dataclasses import asdict
from pathlib import Path
from typing import Any

from slowlink.emulate.plan import PREFIX, Link, Plan
from slowlink.errors import EmulationError, field_error

STATE_DIR = Path(os.environ.get("SLOWLINK_EMULATE_STATE", "/run/slowlink-emulate"))
TBF_BURST = "64kb"
TBF_LATENCY = "50ms"


def check_root() -> None:
    """Raise :class:`EmulationError` unless we are root and ``ip`` and ``tc`` exist."""
    if os.geteuid() != 0:
        raise EmulationError("emulate needs root (network namespaces and tc); run it with sudo")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise EmulationError(f"emulate needs the {tool!r} command (iproute2), which is not on PATH")


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(args), capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise EmulationError(f"command {' '.join(args)!r} failed: {proc.stderr.strip()}")
    return proc


def nsx(ns: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return sh("ip", "netns", "exec", ns, *args, check=check)


def list_namespaces() -> list[str]:
    out = sh("ip", "netns", "list").stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _shape(ns: str, dev: str, rate_bytes_s: float, replace: bool = False) -> None:
    bits = max(8000, round(rate_bytes_s * 8))
    nsx(ns, "tc", "qdisc", "replace" if replace else "add", "dev", dev, "root", "tbf",
        "rate", f"{bits}bit", "burst", TBF_BURST, "latency", TBF_LATENCY)


def _make_link(link: Link) -> None:
    sh("ip", "link", "add", "name", link.dev_a, "netns", link.a, "type", "veth",
       "peer", "name", link.dev_b, "netns", link.b)
    for ns, dev in ((link.a, link.dev_a), (link.b, link.dev_b)):
        _shape(ns, dev, link.rate_bytes_s)
        if ns.rsplit("-", 1)[1].startswith(("leaf", "spine", "sw")):
            nsx(ns, "ip", "link", "set", dev, "master", "br0")
        nsx(ns, "ip", "link", "set", dev, "up")


def up(plan: Plan) -> Plan:
    """Create the namespaces, bridges and shaped links of ``plan``; on any failure remove them again."""
    check_root()
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    state_file(plan.run_id).write_text(json.dumps(plan_to_json(plan)))
    try:
        for ns in plan.namespaces:
            sh("ip", "netns", "add", ns)
            nsx(ns, "ip", "link", "set", "lo", "up")
        for sw in plan.switches:
            nsx(sw, "ip", "link", "add", "br0", "type", "bridge", "stp_state", "0")
            nsx(sw, "ip", "link", "set", "br0", "up")
        for link in plan.links:
            _make_link(link)
        for ns, addr in zip(plan.nodes, plan.addresses, strict=True):
            nsx(ns, "ip", "addr", "add", f"{addr}/24", "dev", "eth0")
            nsx(ns, "sysctl", "-qw", "net.ipv4.tcp_congestion_control=reno", check=False)
    except BaseException:
        down(plan.run_id)
        raise
    return plan


def state_file(run_id: str) -> Path:
    return STATE_DIR / f"{run_id}.json"


def plan_to_json(plan: Plan) -> dict[str, object]:
    return asdict(plan)


def plan_from_json(data: dict[str, Any]) -> Plan:
    d = dict(data)
    d["links"] = tuple(Link(**x) for x in d["links"])
    for key in ("nodes", "switches", "addresses"):
        d[key] = tuple(d[key])
    return Plan(**d)


def current(run_id: str | None = None) -> Plan:
    """The running emulation (the only one, or the one named ``run_id``)."""
    files = sorted(STATE_DIR.glob("*.json")) if STATE_DIR.exists() else []
    if run_id is not None:
        files = [f for f in files if f.stem == run_id]
    if not files:
        raise EmulationError("no emulation is up: run `slowlink emulate up CLUSTER.yaml` first")
    if len(files) > 1:
        raise EmulationError(f"several emulations are up ({[f.stem for f in files]}): name one with --run")
    return plan_from_json(json.loads(files[0].read_text()))


def down(run_id: str | None = None) -> list[str]:
    """Kill processes in, and delete, every ``sl-`` namespace (of ``run_id`` if given). Idempotent."""
    check_root()
    mine = f"{PREFIX}{run_id}-" if run_id else PREFIX
    removed = []
    for ns in list_namespaces():
        if ns.startswith(mine):
            kill_all(ns)
            sh("ip", "netns", "del", ns, check=False)
            removed.append(ns)
    if STATE_DIR.exists():
        for f in STATE_DIR.glob(f"{run_id or '*'}.json"):
            f.unlink(missing_ok=True)
    return removed


def kill_all(ns: str, sig: int = signal.SIGKILL) -> int:
    """Send ``sig`` to every process in namespace ``ns``; return how many there were."""
    pids = sh("ip", "netns", "pids", ns, check=False).stdout.split()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), sig)
    return len(pids)


# Fault injection -----------------------------------------------------------------------------------------

def set_link(plan: Plan, name: str, state: str) -> None:
    """Take a link ``down`` or bring it ``up`` (both ends)."""
    if state not in ("up", "down"):
        raise EmulationError(field_error("state", state, "must be up or down"))
    link = plan.link(name)
    for ns, dev in ((link.a, link.dev_a), (link.b, link.dev_b)):
        nsx(ns, "ip", "link", "set", dev, state)


def set_rate(plan: Plan, name: str, rate_bytes_s: float) -> None:
    """Reshape both directions of a link to ``rate_bytes_s``."""
    if rate_bytes_s <= 0:
        raise EmulationError(field_error("rate", rate_bytes_s, "must be > 0"))
    link = plan.link(name)
    for ns, dev in ((link.a, link.dev_a), (link.b, link.dev_b)):
        _shape(ns, dev, rate_bytes_s, replace=True)


def has_netem() -> bool:
    """Whether this kernel has the netem qdisc (probed in a throwaway namespace)."""
    probe = f"{PREFIX}probe-{os.getpid()}"
    sh("ip", "netns", "add", probe)
    try:
        return nsx(probe, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms",
                   check=False).returncode == 0
    finally:
        sh("ip", "netns", "del", probe, check=False)


def impair(plan: Plan, name: str, delay_s: float = 0.0, loss: float = 0.0) -> None:
    """Add one-way ``delay_s`` and ``loss`` (fraction) to both directions of a link, with netem.

    Raises :class:`EmulationError` on kernels without netem (this project's CI kernel): a userspace
    delay relay is not built yet.
    """
    if not has_netem():
        raise EmulationError("this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM), so delay and loss "
                             "cannot be added to a link here")
    link = plan.link(name)
    for ns, dev in ((link.a, link.dev_a), (link.b, link.dev_b)):
        bits = round(link.rate_bytes_s * 8)
        nsx(ns, "tc", "qdisc", "replace", "dev", dev, "root", "netem", "delay", f"{delay_s * 1e6:.0f}us",
            "loss", f"{loss * 100:g}%", "rate", f"{bits}bit")


# Running commands -----------------------------------------------------------------------------------------

def node_env(plan: Plan, rank: int, port: int = 29513) -> dict[str, str]:
    env = dict(os.environ)
    env.update(NODE_RANK=str(rank), RANK=str(rank), WORLD=str(len(plan.nodes)),
               WORLD_SIZE=str(len(plan.nodes)), NNODES=str(len(plan.nodes)),
               MASTER_ADDR=plan.addresses[0], MASTER_PORT=str(port), NODE_ADDR=plan.addresses[rank],
               SLOWLINK_EMULATE_RUN=plan.run_id, GLOO_SOCKET_IFNAME="eth0")
    return env


def spawn(plan: Plan, cmd: list[str], nodes: list[int] | None = None) -> list[subprocess.Popen[bytes]]:
    """Start ``cmd`` in each node namespace (all nodes unless ``nodes``) with the rendezvous env vars."""
    if not cmd:
        raise EmulationError("run needs a command after --")
    ranks = list(range(len(plan.nodes))) if nodes is None else [check_node(plan, k) for k in nodes]
    return [subprocess.Popen(["ip", "netns", "exec", plan.nodes[k], *cmd], env=node_env(plan, k))
            for k in ranks]


def check_node(plan: Plan, k: int) -> int:
    if not 0 <= k < len(plan.nodes):
        raise EmulationError(field_error("node", k, f"must be in 0..{len(plan.nodes) - 1}"))
    return k


def run(plan: Plan, cmd: list[str], nodes: list[int] | None = None, timeout_s: float = 600) -> list[int]:
    procs = spawn(plan, cmd, nodes)
    codes = []
    try:
        for p in procs:
            codes.append(p.wait(timeout=timeout_s))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return codes
