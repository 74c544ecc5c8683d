"""``slowlink drill --emulated CLUSTER.yaml``: the fault drill on the emulated cluster, one rank per node
namespace (``slowlink.emulate``, root), each node running its own torchrun agent (``--nnodes N``, c10d
rendezvous hosted by node 0's agent). The fault on a node, from the drill itself: ``cut-link`` takes the
node's link down while every rank waits at the fault step, and brings it back once a survivor has seen the
fault. ``kill-node`` SIGKILLs every process of the node's namespace (its torchrun agent and its rank), and
once a survivor has seen the fault starts a replacement agent on that node, or with ``spare`` on one more
node kept outside the job (a hot spare). ``kill-rank``, ``hang`` and ``exception`` strike inside the rank
as in a local drill. Node 0's agent hosts the rendezvous store, a single point of failure of torchrun's c10d
backend, so the victim must be another node, unless ``store_node`` puts the store on one more node of its
own (a plain ``TCPStore`` server; every agent a client). Namespaces are named ``sl-<run>-...`` (run id ``gp...`` unless
told) and are removed when the drill ends.

Two things make a replacement agent work (torch 2.13, ``torch/distributed/elastic/rendezvous``):

- By default the agents share a TCP store for the ranks, whose address rank 0's agent writes into the
  rendezvous round's keys only on the agent's *first* round (``DynamicRendezvousHandler.next_rendezvous``
  rebuilds its ``RendezvousStoreInfo`` only when it has none yet). A replacement joins at round 1 with none,
  so, unless it became rank 0, it waits for a key no survivor writes, while the survivor waits for the
  replacement's ``role_info``: both timed out after 60 s. ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`` makes
  every agent rebuild it every round; the ranks then meet in the rendezvous store itself (node 0's agent,
  ``SLOWLINK_DRILL_STORE``), whichever node is rank 0 in the new round.
- The next round starts only once the killed agent is declared dead: its last heartbeat older than
  ``keep_alive_interval x keep_alive_max_attempt`` (5 s x 3, torch's defaults, given explicitly here). The
  heartbeat stopped up to one interval before the kill, so that is expected ``interval x (attempts - 1/2)``
  after the fault; the round also waits for the replacement agent to start and join
  (:class:`~slowlink.drill.harness.AgentReplacement`).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slowlink.drill.harness import (
    AgentReplacement,
    DrillConfig,
    Launch,
    _events,
    _reap,
    job_config,
    summarize,
)
from slowlink.drill.result import DrillResult
from slowlink.errors import SpecError

if TYPE_CHECKING:
    from slowlink.progress import OnStep

NODE_FAULTS = ("kill-node", "cut-link")
REPAIR_AFTER_S = 2.0  # the link comes back, or the replacement agent starts, this long after a survivor saw the fault
# torch.distributed.elastic's c10d rendezvous defaults (dynamic_rendezvous.create_handler, torch 2.13): an agent
# whose heartbeat is older than interval x attempts is dead and leaves the round.
KEEP_ALIVE_INTERVAL_S = 5
KEEP_ALIVE_MAX_ATTEMPT = 3


@dataclass(frozen=True)
class _Job:
    """One run on the emulated cluster: the job runs on nodes 0..nnodes-1; a kill-node's replacement agent
    starts on ``spare`` (a node outside the job) or, if None, on the killed node itself."""

    plan: Any
    cfg: DrillConfig
    out: Path
    conf: Path
    rdzv: str
    rid: str
    nnodes: int
    spare: int | None
    store_node: bool  # the rendezvous store runs on the plan's last node, not in node 0's agent


def _agent(job: _Job, k: int, log: Path) -> subprocess.Popen[bytes]:
    """Node ``k``'s torchrun agent, started in the node's namespace (its own session, to be killed whole)."""
    from slowlink.emulate.net import node_env

    cfg = job.cfg
    # Ranks join the rendezvous store (node 0's agent) themselves; agents build each round's bootstrap store
    # info anew (TORCH_DISABLE_SHARE_RDZV_TCP_STORE, module docstring: the replacement's deadlock).
    env = {**node_env(job.plan, k), "OMP_NUM_THREADS": "1", "SLOWLINK_DRILL_STORE": job.rdzv,
           "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    cmd = ["ip", "netns", "exec", job.plan.nodes[k], sys.executable, "-m", "torch.distributed.run",
           "--nnodes", str(job.nnodes), "--nproc-per-node", "1", "--local-addr", job.plan.addresses[k],
           "--max-restarts", str(cfg.max_restarts), "--monitor-interval", "0.1",
           "--shutdown-timeout", str(cfg.shutdown_timeout_s), "--rdzv-backend", "c10d", "--rdzv-endpoint", job.rdzv,
           # node 0 hosts the store (unless it has a node of its own): torchrun would only guess so from the host
           # name, not a namespace's address
           "--rdzv-conf", f"is_host={str(k == 0 and not job.store_node).lower()},join_timeout={int(cfg.timeout_s)},"
           f"keep_alive_interval={KEEP_ALIVE_INTERVAL_S},keep_alive_max_attempt={KEEP_ALIVE_MAX_ATTEMPT}",
           "--rdzv-id", job.rid, "-m", "slowlink.drill.worker", str(job.conf)]
    with log.open("ab") as f:
        return subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _fire(job: _Job, agents: dict[int, subprocess.Popen[bytes]]) -> None:
    """Strike the node fault while every rank waits at the fault step, then let them go."""
    from slowlink.emulate.net import kill_node, set_link

    cfg, v = job.cfg, job.cfg.fault_rank
    rec = {"ev": "fault", "t": time.time(), "rank": v, "attempt": 0, "step": cfg.fault_step, "kind": cfg.fault}
    with (job.out / "events-rdrill.jsonl").open("a") as f:
        f.write(json.dumps(rec) + "\n")
    if cfg.fault == "kill-node":
        kill_node(job.plan, v)
        agents[v].wait()
    else:
        set_link(job.plan, f"n{v}", "down")
    (job.out / "go").write_text("go\n")


def _repair(job: _Job, agents: dict[int, subprocess.Popen[bytes]]) -> None:
    """Once a survivor has seen the fault: bring the cut link back, or start a replacement agent on the
    killed node or on the spare (a hot spare taking its place)."""
    from slowlink.emulate.net import set_link

    v = job.cfg.fault_rank
    if job.cfg.fault == "kill-node":
        k = v if job.spare is None else job.spare
        agents.pop(v)  # killed and waited for in _fire: its exit code is not the job's
        agents[k] = _agent(job, k, job.out / f"torchrun-n{k}-replacement.log")
    else:
        set_link(job.plan, f"n{v}", "up")


def _wait(job: _Job, agents: dict[int, subprocess.Popen[bytes]], faulty: bool) -> int:
    """Poll the job: fire a node fault at the pause, repair it once a survivor saw it; the exit code."""
    cfg = job.cfg
    fired = repaired = not (faulty and cfg.fault in NODE_FAULTS)
    end = time.time() + cfg.timeout_s
    t_fault = 0.0
    while time.time() < end:
        if all(p.poll() is not None for p in agents.values()):
            return max((abs(p.returncode) for p in agents.values()), default=0)
        evs = _events(job.out)
        if not fired and len({e["rank"] for e in evs if e["ev"] == "paused"}) == job.nnodes:
            _fire(job, agents)
            fired, t_fault = True, time.time()
        if fired and not repaired and any(e["ev"] == "error" and e["t"] >= t_fault for e in evs):
            time.sleep(REPAIR_AFTER_S)
            _repair(job, agents)
            repaired = True
        time.sleep(0.1)
    return -1


def _store(plan: Any, out: Path) -> tuple[str, subprocess.Popen[bytes] | None]:
    """The rendezvous endpoint on the plan's last node, and the store process serving it there."""
    from slowlink.emulate.net import node_env

    k = len(plan.nodes) - 1
    port = 29400 + secrets.randbelow(500)
    cmd = ["ip", "netns", "exec", plan.nodes[k], sys.executable, "-m", "slowlink.drill.worker",
           "--store", plan.addresses[k], str(port)]
    env = {**node_env(plan, k), "PYTHONPATH": os.pathsep.join(sys.path)}
    with (out / "store.log").open("ab") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    return f"{plan.addresses[k]}:{port}", proc


def launch_emulated(plan: Any, cfg: DrillConfig, work: Path, tag: str, faulty: bool, spare: bool = False,
                    store_node: bool = False) -> Launch:
    """Run the job once, one torchrun agent per node namespace, and collect what its ranks wrote; with
    ``spare`` a node after the job's is kept out of it for a kill-node's replacement, with ``store_node``
    the plan's last node hosts the rendezvous store instead of node 0's agent."""
    out = work / tag
    conf = job_config(cfg, out, faulty, in_rank_faults=("kill-rank", "hang", "exception"))
    if faulty and cfg.fault in NODE_FAULTS:
        data = json.loads(conf.read_text())
        conf.write_text(json.dumps({**data, "pause_step": cfg.fault_step}))
    n = len(plan.nodes) - int(spare) - int(store_node)
    rdzv, store = _store(plan, out) if store_node else (f"{plan.addresses[0]}:{29400 + secrets.randbelow(500)}",
                                                         None)
    job = _Job(plan, cfg, out, conf, rdzv, f"drill-{uuid.uuid4().hex[:8]}", n, n if spare else None, store_node)
    t0 = time.time()
    agents = {k: _agent(job, k, out / f"torchrun-n{k}.log") for k in range(n)}
    left: list[int] = []
    try:
        rc = _wait(job, agents, faulty)
    finally:
        # torchrun starts its ranks in sessions of their own: kill the agents' groups, then any rank still alive
        pids = sorted({e["pid"] for e in _events(out) if e["ev"] == "start"})
        for i, p in enumerate(agents.values()):
            left += _reap(p, [] if i else pids)
        if store is not None:
            _reap(store, [])
    events = _events(out)
    log = "\n".join(f.read_text(errors="replace") for f in sorted(out.glob("torchrun-*.log")))
    if rc == -1:
        log += f"\ndrill: the job did not finish within --timeout ({cfg.timeout_s:g} s); it was killed"
    return Launch(rc, events, out / "final.pt", log, t0, left, run_id=f"{plan.run_id}/{job.rid}")


def check_emulated(cfg: DrillConfig, nodes: int, store_node: bool = False) -> DrillConfig:
    """The drill on ``nodes`` nodes, one rank each; node faults need a victim other than node 0 unless the
    rendezvous store has a node of its own."""
    cfg = replace(cfg, nproc=nodes, ranks_per_node=1)
    cfg.check()
    if cfg.fault in NODE_FAULTS and cfg.fault_rank == 0 and not store_node:
        raise SpecError(f"--fault-rank (0): node 0 hosts torchrun's rendezvous store; a {cfg.fault} drill needs "
                        "another node, or --store-node")
    if cfg.fault in NODE_FAULTS and cfg.fault_phase != "step":
        raise SpecError(f"--fault-phase ({cfg.fault_phase!r}): a {cfg.fault} drill strikes between steps")
    return cfg


def replacement(cfg: DrillConfig) -> AgentReplacement | None:
    """kill-node: the killed agent is dead for the rendezvous after the expected heartbeat expiry (module
    docstring), and its replacement starts ``REPAIR_AFTER_S`` after detection."""
    if cfg.fault != "kill-node":
        return None
    return AgentReplacement(KEEP_ALIVE_INTERVAL_S * (KEEP_ALIVE_MAX_ATTEMPT - 0.5), REPAIR_AFTER_S)


def run_emulated_drill(cfg: DrillConfig, cluster_path: Path, nodes: int | None = None,
                       workdir: Path | None = None, run_prefix: str = "gp", spare: bool = False,
                       store_node: bool = False, on_step: OnStep | None = None) -> DrillResult:
    """Bring up the emulated cluster (run id ``<run_prefix>...``), run the reference and the faulted job on
    it, take it down, and compare (:func:`slowlink.drill.harness.summarize`). With ``spare`` (kill-node
    only) one more node is brought up, outside the job, and the replacement agent starts there; with
    ``store_node`` one more again hosts the rendezvous store, so node 0 may be the victim too. ``on_step`` is
    told as each phase begins: bring-up, the two runs, tear-down."""
    from slowlink.emulate.net import check_root, down, up_owned
    from slowlink.emulate.plan import build_plan
    from slowlink.spec.cluster import load_cluster

    if spare and cfg.fault != "kill-node":
        raise SpecError(f"--spare (True) needs --fault kill-node: only a killed node is replaced, not {cfg.fault}")
    check_root()
    cluster = load_cluster(cluster_path)
    n = nodes or cluster.nodes
    cfg = check_emulated(cfg, n, store_node)
    plan = build_plan(cluster, nodes=n + int(spare) + int(store_node), run_id=f"{run_prefix}{secrets.token_hex(3)}")
    step = on_step or (lambda what: None)
    with tempfile.TemporaryDirectory(prefix="slowlink-drill-", dir=workdir) as tmp:
        work = Path(tmp)
        step(f"bring-up ({len(plan.nodes)} nodes)")
        plan = up_owned(plan)  # a killed drill's namespaces, state file and agents go at the next start
        try:
            step(f"reference run ({cfg.steps} steps)")
            ref = launch_emulated(plan, replace(cfg, max_restarts=0), work, "reference", False, spare, store_node)
            step(f"drill run ({cfg.fault} at step {cfg.fault_step})")
            run = launch_emulated(plan, cfg, work, "drill", True, spare, store_node)
        finally:
            step("tear-down")
            down(plan.run_id)
        return summarize(cfg, ref, run, replacement(cfg))
