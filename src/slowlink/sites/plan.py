"""The cross-site part of a plan: which dimension crosses the long haul, its bytes per step, what the step waits
for and how busy the links are.

Placement keeps each model replica (TP, CP, EP and PP) inside a site and splits the data-parallel replicas over
the sites, site after site: DP crosses; with ``sync.crosses: pp`` the pipeline stages are split instead and the
activations cross (:mod:`slowlink.sites.pipeline`). Exposed seconds per step, by method
(:mod:`slowlink.sites.traffic` for the bytes, :mod:`slowlink.sites.transport` for the rate ``R`` of a site's
egress, ``L`` = crossings x RTT / 2):

  ddp           the flat ring runs at its slowest edge: T = max(T_in, B / R) + L
  hierarchical  its phases run one after another:     T = T_in + B / R + L
                either hides behind the backward the step model lets DP hide behind (``StepResult.dp_window_s``):
                exposed = max(0, T - W) - max(0, T_in - W), at least L (the last bucket crosses after the backward)
  diloco        the outer all-reduce blocks every H steps: (B / R + L) / H
  streaming     each of F fragments runs beside ``overlap_steps`` inner steps: F / H x max(0, B_f / R + L -
                overlap_steps x step)
where T_in is the step model's DP reduction as one site would run it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from slowlink.errors import InfeasiblePlan
from slowlink.sites.convergence import convergence_note
from slowlink.sites.traffic import SyncTraffic, sync_traffic
from slowlink.sites.transport import egress_rate_bytes_s
from slowlink.spec.cluster import Cluster
from slowlink.spec.sites import Sites
from slowlink.spec.workload import Sync, Workload
from slowlink.units import PRECISION_BYTES
from slowlink.workload.flops import params
from slowlink.workload.step import StepResult


@dataclass(frozen=True)
class CrossSite:
    """What crosses the sites in one plan (module docstring); ``bytes_per_step`` sums every site's egress."""

    sites: tuple[str, ...]
    dims: tuple[str, ...]
    method: str
    bytes_per_step: float
    exposed_s: float
    dci_utilisation: float
    convergence_note: str
    egress_bytes_s: float        # what a site's egress carries for this sync (window, loss and line)
    line_bytes_s: float          # its line rate
    bdp_bytes: float             # its bandwidth-delay product
    sync_s: float                # one sync's seconds on the long haul (one fragment for streaming-diloco)
    paced_by: str | None = None  # the site whose own fabric sets the step (None: every site runs one fabric)

    def sentence(self) -> str:
        """One line for ``plan``: which dimension crosses, its bytes, what the step waits and the convergence."""
        return (f"cross-site: {', '.join(self.dims)} crosses {' | '.join(self.sites)} by {self.method}: "
                f"{self.bytes_per_step / 1e9:.3g} GB per step over the long haul, {self.exposed_s:.3g} s exposed, "
                f"{self.dci_utilisation:.1%} of its line rate used; convergence: {self.convergence_note}"
                + ("" if self.paced_by is None else f"; the step is {self.paced_by}'s, on its own fabric"))

    def to_json(self) -> dict[str, object]:
        return {"sites": list(self.sites), "dims": list(self.dims), "bytes_per_step": self.bytes_per_step,
                "exposed_s": self.exposed_s, "dci_utilisation": self.dci_utilisation, "method": self.method,
                "convergence_note": self.convergence_note, "egress_bytes_s": self.egress_bytes_s,
                "line_bytes_s": self.line_bytes_s, "bdp_bytes": self.bdp_bytes, "sync_s": self.sync_s,
                **({} if self.paced_by is None else {"paced_by": self.paced_by})}


def fabric_variants(cluster: Cluster) -> list[tuple[str, Cluster]]:
    """The job on each fabric its sites run, one site's view each: (the sites on it, joined by " + ", the cluster
    on that fabric without sites). One entry, the cluster's own fabric, where no site has a fabric of its own."""
    own = dict(cluster.site_fabrics)
    names = cluster.sites.names if cluster.sites is not None else ()
    groups: dict[str, list[str]] = {}
    fabrics = {}
    for name in names or ("",):
        f = own.get(name, cluster.fabric)
        groups.setdefault(repr(f), []).append(name)
        fabrics[repr(f)] = f
    return [(" + ".join(n), replace(cluster, fabric=fabrics[k], sites=None, site_fabrics=()))
            for k, n in groups.items()]


def replicas_per_site(w: Workload, cluster: Cluster, sites: Sites) -> tuple[int, ...]:
    """Data-parallel replicas each site holds; refuses a site that would split a replica (TP, CP, PP) or an
    expert-parallel group."""
    p = w.parallel
    out = []
    for s in sites.sites:
        gpus = s.nodes * cluster.gpus_per_node
        if gpus % p.model_parallel:
            raise InfeasiblePlan(f"sites: site {s.name} holds {gpus} GPUs, not a multiple of tp ({p.tp}) * pp "
                                 f"({p.pp}) * cp ({p.cp}) = {p.model_parallel}: a model replica would span sites",
                                 rule="site_holds_replicas")
        n = gpus // p.model_parallel
        if n % p.ep:
            raise InfeasiblePlan(f"sites: site {s.name} holds {n} data-parallel replicas, not a multiple of ep "
                                 f"({p.ep}): an expert-parallel group would span sites", rule="site_holds_replicas")
        out.append(n)
    return tuple(out)


def exposed_s(sync: Sync, t: SyncTraffic, sync_s: float, latency_s: float, step: StepResult) -> float:
    """Seconds per step the step waits for the long haul (module docstring)."""
    if sync.method in ("ddp", "hierarchical"):
        inside = step.comm_total_s.get("dp", 0.0)
        wire = sync_s - latency_s
        total = (max(inside, wire) if sync.method == "ddp" else inside + wire) + latency_s
        window = step.dp_window_s
        return max(latency_s, max(0.0, total - window) - max(0.0, inside - window))
    if sync.method == "diloco":
        return sync_s * t.syncs_per_step
    return max(0.0, sync_s - sync.overlap_steps * step.step_time_s) * t.syncs_per_step


def cross_site(w: Workload, cluster: Cluster, step: StepResult) -> CrossSite | None:
    """The cross-site part of ``w``'s plan on ``cluster`` (None for a one-site cluster); ``step`` is the step
    model's answer, as one site would run it."""
    sites = cluster.sites
    if sites is None:
        return None
    sync = w.sync if w.sync is not None else Sync()
    if sync.crosses == "pp":
        return _pipeline(w, cluster, sites, step)
    p = w.parallel
    replicas = replicas_per_site(w, cluster, sites)
    # tp x pp groups each reduce their slice of the whole model (experts included) over dp x cp ranks
    dense, expert = params(w.model)
    slice_params = (dense + expert) / (p.tp * p.pp)
    grad = slice_params * PRECISION_BYTES[w.training.grad_comm_dtype]
    n = len(sites.sites)
    t = sync_traffic(sync, grad, slice_params, p.dp_shards, n, p.tp * p.pp, min(replicas) * p.cp)
    ic = sites.interconnect
    rate = egress_rate_bytes_s(ic, t.connections)
    latency = t.crossings * ic.rtt_s / 2.0
    sync_s = t.bytes_per_sync / rate + latency
    exposed = exposed_s(sync, t, sync_s, latency, step)
    new_step = step.step_time_s + exposed
    return CrossSite(sites=sites.names, dims=("dp",), method=sync.method, bytes_per_step=n * t.bytes_per_step,
                     exposed_s=exposed, dci_utilisation=t.bytes_per_step / (new_step * ic.egress_bytes_s),
                     convergence_note=convergence_note(sync), egress_bytes_s=rate, line_bytes_s=ic.egress_bytes_s,
                     bdp_bytes=ic.bdp_bytes, sync_s=sync_s)


def _pipeline(w: Workload, cluster: Cluster, sites: Sites, step: StepResult) -> CrossSite:
    """The cross-site part when pipeline stages span the sites (:mod:`slowlink.sites.pipeline`)."""
    from slowlink.sites.pipeline import PP_NOTE, pp_cross

    total, exposed, hop, rate = pp_cross(w, cluster, step)
    ic, n = sites.interconnect, len(sites.sites)
    new_step = step.step_time_s + exposed
    return CrossSite(sites=sites.names, dims=("pp",), method="ddp", bytes_per_step=total, exposed_s=exposed,
                     dci_utilisation=total / n / (new_step * ic.egress_bytes_s), convergence_note=PP_NOTE,
                     egress_bytes_s=rate, line_bytes_s=ic.egress_bytes_s, bdp_bytes=ic.bdp_bytes, sync_s=hop)


def with_cross_site(step: StepResult, cross: CrossSite) -> StepResult:
    """``step`` with the exposed cross-site seconds added: its time, and the throughput and FLOP/s rates that
    follow from it."""
    old, new = step.step_time_s, step.step_time_s + cross.exposed_s
    k = old / new
    return replace(step, step_time_s=new, tokens_per_s=step.tokens_per_s * k, tflops_per_gpu=step.tflops_per_gpu * k,
                   mfu=step.mfu * k, hfu=step.hfu * k)
