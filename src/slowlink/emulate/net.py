"""Building, using and removing the emulated cluster with ``ip`` and ``tc`` (needs root).

Every namespace is named ``sl-<run id>-...``; veth pairs are created directly inside their namespaces,
so nothing is ever added to the host's own namespace. A state file in ``/run/slowlink-emulate`` lists
what was made; ``down`` removes it, and a prefix sweep removes anything left by a crashed run.
Links are shaped with ``tbf`` at both ends; an impaired link (delay, loss) uses netem where the kernel
has it, else a relay namespace in its middle running :mod:`slowlink.emulate.relay`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from slowlink.emulate.plan import PREFIX, Link, Plan
from slowlink.errors import EmulationError, field_error
from slowlink.procs import pid_alive

STATE_DIR = Path(os.environ.get("SLOWLINK_EMULATE_STATE", "/run/slowlink-emulate"))
TBF_BURST = "64kb"
TBF_LATENCY = "50ms"
_NS_SYSCTLS = ("net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")


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


def tc_batch(ns: str, lines: list[str]) -> None:
    """Run many ``tc`` commands in one namespace with one process (``tc -batch``)."""
    with tempfile.NamedTemporaryFile("w", suffix=".tc") as f:
        f.write("\n".join(lines) + "\n")
        f.flush()
        nsx(ns, "tc", "-batch", f.name)


def list_namespaces() -> list[str]:
    out = sh("ip", "netns", "list").stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _shape_cmd(dev: str, link: Link, verb: str = "add") -> str:
    bits = max(8000, round(link.rate_bytes_s * 8))
    if link.impaired and has_netem():
        return (f"qdisc {verb} dev {dev} root netem delay {link.delay_s * 1e6:.0f}us "
                f"loss {link.loss * 100:g}% rate {bits}bit")
    return f"qdisc {verb} dev {dev} root tbf rate {bits}bit burst {TBF_BURST} latency {TBF_LATENCY}"


def _relayed(link: Link) -> bool:
    return link.impaired and not has_netem()


def _new_ns(ns: str) -> None:
    sh("ip", "netns", "add", ns)
    nsx(ns, "ip", "link", "set", "lo", "up")
    for s in _NS_SYSCTLS:
        nsx(ns, "sysctl", "-qw", s, check=False)


def _attach(plan: Plan, link: Link) -> None:
    """Shape both ends, put switch ends in their rail's bridge, address node ends, bring all up."""
    for ns, dev in ((link.a, link.dev_a), (link.b, link.dev_b)):
        tc_batch(ns, [_shape_cmd(dev, link)])
        if ns in plan.switches:
            nsx(ns, "ip", "link", "set", dev, "master", f"br{link.rail}")
        elif ns in plan.nodes:
            addr = plan.address(plan.nodes.index(ns), link.rail)
            nsx(ns, "ip", "addr", "replace", f"{addr}/24", "dev", dev)
        nsx(ns, "ip", "link", "set", dev, "up")


def _make_link(plan: Plan, link: Link) -> None:
    if not _relayed(link):
        sh("ip", "link", "add", "name", link.dev_a, "netns", link.a, "type", "veth",
           "peer", "name", link.dev_b, "netns", link.b)
        _attach(plan, link)
        return
    mid = plan.relay_ns(link)
    _new_ns(mid)
    sh("ip", "link", "add", "name", link.dev_a, "netns", link.a, "type", "veth", "peer", "name", "ra",
       "netns", mid)
    sh("ip", "link", "add", "name", "rb", "netns", mid, "type", "veth", "peer", "name", link.dev_b,
       "netns", link.b)
    for ns, devs in ((mid, ("ra", "rb")), (link.a, (link.dev_a,)), (link.b, (link.dev_b,))):
        nsx(ns, sys.executable, "-m", "slowlink.emulate.relay", "--no-offload", *devs)
    for dev in ("ra", "rb"):
        nsx(mid, "ip", "link", "set", dev, "up")
    _attach(plan, link)
    proc = subprocess.Popen(["ip", "netns", "exec", mid, sys.executable, "-m", "slowlink.emulate.relay", "ra",
                             "rb", repr(link.delay_s), repr(link.loss), str(plan.seed)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, start_new_session=True, env=package_env())
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        raise EmulationError(f"the delay relay of link {link.name} did not start")


def package_env() -> dict[str, str]:
    """This process's environment with our own package first on PYTHONPATH (relays import it)."""
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [env.get("PYTHONPATH")])])
    return env


def up(plan: Plan) -> Plan:
    """Create the namespaces, bridges and shaped links of ``plan``; on any failure remove them again."""
    check_root()
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    save(plan)
    try:
        for ns in plan.namespaces:
            _new_ns(ns)
        for sw in plan.switches:
            for r in range(plan.rails):
                nsx(sw, "ip", "link", "add", f"br{r}", "type", "bridge", "stp_state", "0")
                nsx(sw, "ip", "link", "set", f"br{r}", "up")
        for link in plan.links:
            _make_link(plan, link)
        for ns in plan.nodes:
            nsx(ns, "sysctl", "-qw", "net.ipv4.tcp_congestion_control=reno", check=False)
    except BaseException:
        down(plan.run_id)
        raise
    return plan


def up_owned(plan: Plan) -> Plan:
    """:func:`up` for a run that lives only as long as this process (a drill, a probe, a validation): stale runs
    (:func:`stale`: a killed command's namespaces, state file and processes) are removed first, and this one
    records this process as its owner, so that if it is killed the next start or ``emulate down`` removes it."""
    remove_stale()
    return up(replace(plan, owner_pid=os.getpid()))


def state_file(run_id: str) -> Path:
    return STATE_DIR / f"{run_id}.json"


def save(plan: Plan) -> None:
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    state_file(plan.run_id).write_text(json.dumps(plan_to_json(plan)))


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


def runs() -> dict[str, list[str]]:
    """Every emulation on this host: run id -> its namespaces (a run with a state file and no namespace yet, or
    namespaces whose state file is gone, included)."""
    ids = {f.stem for f in STATE_DIR.glob("*.json")} if STATE_DIR.exists() else set()
    found: dict[str, list[str]] = {i: [] for i in ids}
    for ns in list_namespaces():
        if ns.startswith(PREFIX):
            rid = next((i for i in ids if ns.startswith(f"{PREFIX}{i}-")), ns[len(PREFIX):].split("-")[0])
            found.setdefault(rid, []).append(ns)
    return found


def stale(run_id: str) -> bool:
    """A run nobody owns any more: its state file names an owner process that is gone (a killed drill). A run
    brought up by ``emulate up`` (owner 0) is never stale, nor are namespaces without a state file here (another
    state directory's run, perhaps): only ``down RUN`` or ``--all`` removes those."""
    try:
        owner = int(json.loads(state_file(run_id).read_text()).get("owner_pid", 0))
    except (OSError, ValueError):
        return False
    return owner != 0 and not pid_alive(owner)


def remove_stale() -> list[str]:
    """Remove every stale run (:func:`stale`); the run ids removed."""
    gone = [r for r in runs() if stale(r)]
    for r in gone:
        down(r)
    return gone


def down_run(run_id: str | None) -> list[str]:
    """``emulate down [RUN]``: the stale runs, and RUN, or the one run left when none is named; the run ids
    removed. Several runs and none named: an error naming them (``--all`` is :func:`down` with no run)."""
    check_root()
    known = runs()
    if run_id is not None and run_id not in known:
        raise EmulationError(field_error("RUN", run_id, f"is not an emulation on this host; runs: {sorted(known)}"))
    removed = remove_stale()
    left = [r for r in runs() if r not in removed]
    if run_id is None and len(left) > 1:
        raise EmulationError(field_error("RUN", None, f"is needed: several emulations are up ({sorted(left)}); "
                                         "name one, or give --all to remove every sl- namespace"))
    for r in [run_id] if run_id is not None else left:
        if r not in removed:
            down(r)
            removed.append(r)
    return removed


def kill_all(ns: str, sig: int = signal.SIGKILL) -> int:
    """Send ``sig`` to every process in namespace ``ns``; return how many there were."""
    pids = sh("ip", "netns", "pids", ns, check=False).stdout.split()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), sig)
    return len(pids)


@functools.cache
def has_netem() -> bool:
    """Whether this kernel has the netem qdisc (probed once, in a throwaway namespace)."""
    probe = f"{PREFIX}probe-{os.getpid()}"
    sh("ip", "netns", "add", probe)
    try:
        return nsx(probe, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms",
                   check=False).returncode == 0
    finally:
        sh("ip", "netns", "del", probe, check=False)


# Fault injection -----------------------------------------------------------------------------------------

def set_link(plan: Plan, name: str, state: str) -> None:
    """Take a link ``down`` or bring it ``up`` (both ends)."""
    if state not in ("up", "down"):
        raise EmulationError(field_error("state", state, "must be up or down"))
    link = plan.link(name)
    for ns, dev in ((link.a, link.dev_a), (link.b, link.dev_b)):
        nsx(ns, "ip", "link", "set", dev, state)


def set_rate(plan: Plan, name: str, rate_bytes_s: float) -> Plan:
    """Reshape both directions of a link to ``rate_bytes_s``; return (and save) the updated plan."""
    if not rate_bytes_s > 0:
        raise EmulationError(field_error("rate", rate_bytes_s, "must be > 0"))
    link = replace(plan.link(name), rate_bytes_s=rate_bytes_s)
    for ns, dev in ((link.a, link.dev_a), (link.b, link.dev_b)):
        tc_batch(ns, [_shape_cmd(dev, link, "replace")])
    return _updated(plan, link)


def impair(plan: Plan, name: str, delay_s: float = 0.0, loss: float = 0.0) -> Plan:
    """Set link ``name``'s added one-way ``delay_s`` and ``loss`` fraction (0, 0 removes them).

    With netem the qdiscs are replaced in place; without it the link is rebuilt around a relay
    namespace, which cuts the link for a few milliseconds (TCP connections survive).
    """
    if not 0 <= delay_s < 10:
        raise EmulationError(field_error("delay", delay_s, "must be in [0, 10) seconds"))
    if not 0 <= loss < 1:
        raise EmulationError(field_error("loss", loss, "must be in [0, 1)"))
    old = plan.link(name)
    link = replace(old, delay_s=delay_s, loss=loss)
    if has_netem():
        for ns, dev in ((link.a, link.dev_a), (link.b, link.dev_b)):
            tc_batch(ns, [_shape_cmd(dev, link, "replace")])
        return _updated(plan, link)
    relay = plan.relay_ns(old)
    mac = json.loads(nsx(old.a, "ip", "-j", "link", "show", old.dev_a).stdout)[0]["address"]
    if relay in list_namespaces():
        kill_all(relay)
        for dev in ("ra", "rb"):  # now: a namespace dies only when its last process has exited
            nsx(relay, "ip", "link", "del", dev, check=False)
        sh("ip", "netns", "del", relay)
    sh("ip", "netns", "exec", old.a, "ip", "link", "del", old.dev_a, check=False)
    new = _updated(plan, link)
    _make_link(new, link)
    # Keep the node's MAC, so that the neighbours' ARP entries stay right.
    nsx(link.a, "ip", "link", "set", link.dev_a, "address", mac)
    return new


def _updated(plan: Plan, link: Link) -> Plan:
    new = replace(plan, links=tuple(link if x.name == link.name else x for x in plan.links))
    if state_file(plan.run_id).exists():
        save(new)
    return new


# Running commands -----------------------------------------------------------------------------------------

def node_env(plan: Plan, rank: int, port: int = 29513) -> dict[str, str]:
    env = package_env()
    env.update(NODE_RANK=str(rank), RANK=str(rank), WORLD=str(len(plan.nodes)),
               WORLD_SIZE=str(len(plan.nodes)), NNODES=str(len(plan.nodes)),
               MASTER_ADDR=plan.addresses[0], MASTER_PORT=str(port), NODE_ADDR=plan.addresses[rank],
               SLOWLINK_EMULATE_RUN=plan.run_id,
               GLOO_SOCKET_IFNAME=",".join(f"eth{r}" for r in range(plan.rails)))
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


def kill_node(plan: Plan, k: int) -> int:
    """Kill every process of node ``k`` (SIGKILL); return how many there were."""
    return kill_all(plan.nodes[check_node(plan, k)])


def run(plan: Plan, cmd: list[str], nodes: list[int] | None = None, timeout_s: float = 600) -> list[int]:
    """Run ``cmd`` in each node and wait; exit codes in node order. Killed after ``timeout_s``."""
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
