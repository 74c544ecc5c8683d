"""What to change across sites, each change checked by re-running the cross-site model: another sync method (the
published settings first) or the other dimension across the sites (PP instead of DP, or back), more long-haul links,
RDMA over the long haul, more streams per connection.

Each is compared with the step as planned (the step model's step plus the exposed cross-site seconds) and kept when
it saves more than :data:`~slowlink.workload.advice.MIN_GAIN` of it; a sync method that syncs less says what its
convergence is published to cost (:mod:`slowlink.sites.convergence`), since a faster step at worse quality per token
is not a free gain. Best first.
"""

from __future__ import annotations

from dataclasses import replace

from slowlink.errors import SlowlinkError
from slowlink.sites.convergence import convergence_note
from slowlink.sites.plan import CrossSite, cross_site
from slowlink.spec.cluster import Cluster
from slowlink.spec.sites import MAX_STREAMS, Interconnect
from slowlink.spec.workload import Sync, Workload
from slowlink.workload.advice import MIN_GAIN, Advice
from slowlink.workload.step import StepResult

# The sync settings offered: the two methods that sync every step, the two published DiLoCo settings (DiLoCo's
# H = 500 at full precision, INTELLECT-1's H = 100 with int8) and Streaming DiLoCo's 4-bit fragments (its
# fragment count and overlap are this module's choice, said in its convergence note).
SYNC_OPTIONS = (Sync("ddp"), Sync("hierarchical"), Sync("diloco", 500, outer_dtype="fp32"),
                Sync("diloco", 100, outer_dtype="int8"),
                Sync("streaming-diloco", 100, outer_dtype="fp4", fragments=10, overlap_steps=5))


def sync_words(sync: Sync) -> str:
    if sync.method in ("ddp", "hierarchical"):
        return sync.method
    frag = f", {sync.fragments} fragments, {sync.overlap_steps} steps overlapped" if sync.fragments > 1 else ""
    return f"{sync.method} (H = {sync.inner_steps}, {sync.outer_dtype} pseudo-gradients{frag})"


def _candidates(w: Workload, cluster: Cluster, cross: CrossSite) -> list[tuple[str, Workload, Cluster]]:
    sites = cluster.sites
    if sites is None:
        return []
    current = w.sync if w.sync is not None else Sync()
    if current.crosses == "pp":
        out = [(f"whole replicas in each site (DP crosses instead of PP), synced by {sync_words(s)}",
                replace(w, sync=s), cluster) for s in SYNC_OPTIONS]
    else:
        out = [(f"sync by {sync_words(s)} instead of {sync_words(current)}", replace(w, sync=s), cluster)
               for s in SYNC_OPTIONS if s != current]
        out.append(("pipeline stages across the sites instead of whole replicas (sync.crosses: pp; DP stays "
                    "inside each site)", replace(w, sync=Sync(crosses="pp")), cluster))
    ic = sites.interconnect

    def haul(changed: Interconnect) -> Cluster:
        return replace(cluster, sites=replace(sites, interconnect=changed))

    out.append((f"{2 * ic.links} long-haul links per site instead of {ic.links}", w,
                haul(replace(ic, links=2 * ic.links))))
    if ic.transport == "tcp":
        out.append(("RDMA over the long haul instead of TCP (no window: the bandwidth-delay product in flight)", w,
                    haul(replace(ic, transport="rdma", window_bytes=None))))
    if ic.streams_per_connection < MAX_STREAMS:
        more = min(MAX_STREAMS, 4 * ic.streams_per_connection)
        out.append((f"{more} streams per cross-site connection instead of {ic.streams_per_connection} "
                    "(NCCL_NSOCKS_PERTHREAD x NCCL_SOCKET_NTHREADS)", w,
                    haul(replace(ic, streams_per_connection=more))))
    return out


def site_advice(w: Workload, cluster: Cluster, alone: StepResult, cross: CrossSite) -> list[Advice]:
    """Every change across sites that saves more than MIN_GAIN of the planned step (``alone`` + the exposed
    cross-site seconds), best first; ``alone`` is the step model's step as one site would run it."""
    base = alone.step_time_s + cross.exposed_s
    out = []
    for words, w2, c2 in _candidates(w, cluster, cross):
        try:
            x = cross_site(w2, c2, alone)
        except SlowlinkError:
            continue
        if x is None:
            continue
        t = alone.step_time_s + x.exposed_s
        if (gain := 1.0 - t / base) > MIN_GAIN:
            note = "" if w2.sync == w.sync else f"; convergence: {convergence_note(w2.sync or Sync())}"
            out.append(Advice(words + note, t, gain, "cross_site", base))
    return sorted(out, key=lambda a: -a.gain)
