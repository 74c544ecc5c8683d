"""Outages across sites: a long-haul link lost, a site cut off (all its links down at once) or a whole site down,
and what each costs a job by its sync method.

Rates (each part an independent, repairable component: failure rate ``l = 1 / MTBF``, repair time ``r``):
  one link          links x l                        (the links between the sites, each counted once)
  a site cut off    L l^L r^(L-1), lasting r / L     (L parallel links of one site all down: Billinton & Allan,
                                                     "Reliability Evaluation of Engineering Systems", 2nd ed. 1992,
                                                     Sec. 9.3, parallel repairable components, l r << 1); one
                                                     event for two sites, one per site beyond
  a site down       1 / the site's MTBF, lasting its repair hours

Seconds lost per event, as whole-cluster time:
  one link           every method: r x (1 - step / step'), step' the step with that site's egress one link short
  cut off, site down ddp, hierarchical: the collective stalls; the job stops: transport detection + the outage +
                     restart + restore + half a checkpoint interval of lost work (it restarts when the site is
                     back; restarting on fewer sites is not modelled)
  cut off            diloco, streaming: every site trains on, the outer sync waits: the sync in flight is sent again
                     (one sync's seconds); the sites drift apart for the outage's steps (DiLoCo's abstract: robust
                     to resources becoming unavailable; no published tokens-to-quality cost of the drift)
  site down          diloco, streaming: the other sites train on; the lost site's share of the replicas is idle for
                     the outage, its restart and restore
  ETTR factor        1 - sum over events of rate x seconds lost
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from slowlink import units
from slowlink.sites.plan import CrossSite, cross_site, replicas_per_site
from slowlink.spec.cluster import Cluster
from slowlink.spec.sites import Sites
from slowlink.spec.workload import Workload
from slowlink.workload.step import StepResult

SYNCHRONOUS = ("ddp", "hierarchical")


@dataclass(frozen=True)
class Outage:
    """One kind of outage: what is lost, its rate, its length, the seconds it costs and what the job does."""

    what: str
    rate_per_s: float
    length_s: float
    lost_s: float
    behaviour: str

    @property
    def share(self) -> float:
        """Share of wall time the outage costs: rate x seconds lost."""
        return self.rate_per_s * self.lost_s

    def to_json(self) -> dict[str, object]:
        return {"what": self.what, "rate_per_h": self.rate_per_s * units.HOUR, "length_s": self.length_s,
                "lost_s": self.lost_s, "share": self.share, "behaviour": self.behaviour}


@dataclass(frozen=True)
class SiteOutages:
    """Every priced outage of a cluster's sites for one sync method, and what is not priced and why."""

    method: str
    outages: tuple[Outage, ...]
    unpriced: tuple[str, ...]

    @property
    def ettr(self) -> float:
        """The share of wall time the outages leave: ``1 - sum(rate x lost)`` (at least 0)."""
        return max(0.0, 1.0 - sum(o.share for o in self.outages))

    def to_json(self) -> dict[str, object]:
        return {"method": self.method, "ettr": self.ettr, "outages": [o.to_json() for o in self.outages],
                "unpriced": list(self.unpriced)}


@dataclass(frozen=True)
class Recovery:
    """The failure model's seconds a stopped job pays (:class:`~slowlink.reliability.goodput.Failures`)."""

    detect_s: float      # the transport timeout: a lost peer's connections fail
    restart_s: float
    restore_s: float
    interval_s: float    # the checkpoint interval: half of it is lost work


def parallel_links_rate_per_s(links: int, fail_per_s: float, repair_s: float) -> float:
    """Rate at which all ``links`` identical repairable links are down at once: ``L l^L r^(L-1)`` (module
    docstring, Billinton & Allan 1992)."""
    return links * fail_per_s ** links * repair_s ** (links - 1)


def _stop_s(rec: Recovery, length_s: float) -> float:
    return rec.detect_s + length_s + rec.restart_s + rec.restore_s + rec.interval_s / 2.0


def _one_link(w: Workload, cluster: Cluster, sites: Sites, step: StepResult, cross: CrossSite,
              alone: StepResult) -> Outage | None:
    ic = sites.interconnect
    if ic.link_mtbf_s is None or ic.link_repair_s is None:
        return None
    n = len(sites.sites)
    links = n * ic.links / 2.0
    if ic.links == 1:
        return None  # one link per site: its loss cuts the site off (below)
    short = replace(cluster, sites=replace(sites, interconnect=replace(ic, links=ic.links - 1)))
    slower = cross_site(w, short, alone)
    new = alone.step_time_s + (cross.exposed_s if slower is None else slower.exposed_s)
    lost = ic.link_repair_s * (1.0 - step.step_time_s / new)
    return Outage("one long-haul link", links / ic.link_mtbf_s, ic.link_repair_s, lost,
                  f"trains on over {ic.links - 1} of {ic.links} links: each step {new - step.step_time_s:.3g} s "
                  "slower until the repair")


def _cut_off(sync: str, sites: Sites, cross: CrossSite, rec: Recovery) -> Outage | None:
    ic = sites.interconnect
    if ic.link_mtbf_s is None or ic.link_repair_s is None:
        return None
    events = 1 if len(sites.sites) == 2 else len(sites.sites)
    rate = events * parallel_links_rate_per_s(ic.links, 1.0 / ic.link_mtbf_s, ic.link_repair_s)
    length = ic.link_repair_s / ic.links
    if sync in SYNCHRONOUS:
        return Outage("a site cut off (all its links down)", rate, length, _stop_s(rec, length),
                      "the collective stalls: detected by the transport timeout, the job stops until the links are "
                      "back, restarts, restores and redoes the work since its checkpoint")
    return Outage("a site cut off (all its links down)", rate, length, cross.sync_s,
                  "every site trains on alone; the outer sync waits for the links and is sent again (the sites "
                  "drift apart meanwhile: no published convergence cost)")


def _sites_down(w: Workload, cluster: Cluster, sync: str, sites: Sites, rec: Recovery) -> list[Outage]:
    out = []
    replicas = replicas_per_site(w, cluster, sites)
    for s, r in zip(sites.sites, replicas, strict=True):
        if s.mtbf_s is None or s.repair_s is None:
            continue
        what = f"site {s.name} down"
        if sync in SYNCHRONOUS:
            out.append(Outage(what, 1.0 / s.mtbf_s, s.repair_s, _stop_s(rec, s.repair_s),
                              "the job stops until the site is back, restarts, restores and redoes the work since "
                              "its checkpoint"))
        else:
            share = r / sum(replicas)
            lost = share * (s.repair_s + rec.restart_s + rec.restore_s)
            out.append(Outage(what, 1.0 / s.mtbf_s, s.repair_s, lost,
                              f"the other sites train on; its {share:.0%} of the replicas idle through the outage, "
                              "its restart and restore"))
    return out


def site_outages(w: Workload, cluster: Cluster, step: StepResult, alone: StepResult, cross: CrossSite,
                 rec: Recovery) -> SiteOutages | None:
    """The outages of ``cluster``'s sites for ``w``'s sync method (module docstring); ``step`` with the cross-site
    time, ``alone`` without it. None for a one-site cluster."""
    sites = cluster.sites
    if sites is None:
        return None
    sync = cross.method
    outages: list[Outage] = []
    unpriced = []
    ic = sites.interconnect
    if ic.link_mtbf_s is None:
        unpriced.append("long-haul links: interconnect.link_mtbf_hours (None): give it and link_repair_hours to "
                        "price a lost link and a site cut off")
    else:
        one = _one_link(w, cluster, sites, step, cross, alone)
        cut = _cut_off(sync, sites, cross, rec)
        outages += [o for o in (one, cut) if o is not None]
    outages += _sites_down(w, cluster, sync, sites, rec)
    missing = [s.name for s in sites.sites if s.mtbf_s is None]
    if missing:
        unpriced.append(f"site outages of {', '.join(missing)}: sites[].mtbf_hours (None): give it and "
                        "repair_hours to price a site down")
    return SiteOutages(sync, tuple(outages), tuple(unpriced))
