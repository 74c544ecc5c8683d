"""Pipeline parallelism across sites (``sync.crosses: pp``): each site holds pp / N consecutive stages of every model
replica, so the data-parallel groups stay inside a site and the activations cross the long haul.

Per micro-batch and pipeline (one per dp x tp x cp rank), a forward pass crosses a site boundary ``vp N - 1``
times (``N - 1`` in each of the ``vp`` passes over the stages, and ``vp - 1`` wraps from the last stage back to the
first), the backward pass as often; each crossing carries the stage's hop (:func:`~slowlink.workload.traffic.
pp_hop_bytes`). All pipelines send at once, so a crossing runs at the site's egress shared by them:

  bytes per step  = micro-batches x pipelines x 2 (vp N - 1) x hop bytes          (every site's egress)
  hop on the haul = hop bytes / (R / pipelines) + RTT / 2
  exposed         = 2 vp x (micro-batches + N - 1) x max(0, hop on the haul - hop in a site)

The last is the 1F1B schedule's: in its steady state the pipeline advances at its slowest stage, and the stage at a
boundary sends forward and receives backward over the haul every micro-batch (Narayanan et al. 2021, "Efficient
Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", Sec. 2.2); the fill and the drain cross
the N - 1 boundaries once more. The hop in a site is the step model's (its PP seconds per micro-batch / 2 vp);
overlapping the send with compute (``overlap.pp_comm``) is not credited across sites.
"""

from __future__ import annotations

from slowlink.errors import InfeasiblePlan
from slowlink.sites.transport import egress_rate_bytes_s
from slowlink.spec.cluster import Cluster
from slowlink.spec.sites import Sites
from slowlink.spec.workload import Workload
from slowlink.workload.step import StepResult
from slowlink.workload.traffic import pp_hop_bytes

PP_NOTE = ("none: pipeline stages in different sites run the same arithmetic as in one site; the data-parallel "
           "groups stay inside each site")


def check_stages_split(w: Workload, cluster: Cluster, sites: Sites) -> None:
    """Each site holds the same share of every replica's stages: pp a multiple of the sites, equal sites."""
    n, p = len(sites.sites), w.parallel
    if p.pp % n:
        raise InfeasiblePlan(f"sync.crosses (pp): parallel.pp ({p.pp}) must be a multiple of the sites ({n}): each "
                             "site holds pp / sites consecutive stages of every replica", rule="site_holds_stages")
    share = cluster.gpus // n
    for s in sites.sites:
        if s.nodes * cluster.gpus_per_node != share:
            raise InfeasiblePlan(f"sync.crosses (pp): site {s.name} holds {s.nodes * cluster.gpus_per_node} GPUs, "
                                 f"not {cluster.gpus} / {n} = {share}: each site must hold the same share of every "
                                 "replica's stages", rule="site_holds_stages")


def pipeline_crossings(vp: int, sites: int) -> int:
    """Site boundaries one micro-batch crosses in one direction: ``vp N - 1`` (module docstring)."""
    return vp * sites - 1


def pp_hop_in_site_s(w: Workload, step: StepResult) -> float:
    """The step model's seconds of one PP hop in a site: its PP seconds per step / (micro-batches x 2 vp)."""
    return step.comm_total_s.get("pp", 0.0) / (w.micro_batches * 2 * w.parallel.vp)


def pp_cross(w: Workload, cluster: Cluster, step: StepResult) -> tuple[float, float, float, float]:
    """(bytes per step over every site's egress, exposed seconds, one hop's seconds on the haul, the egress
    rate) of pipeline stages across ``cluster``'s sites (module docstring)."""
    sites = cluster.sites
    if sites is None:
        raise InfeasiblePlan("sync.crosses (pp) needs a cluster with sites", rule="site_holds_stages")
    check_stages_split(w, cluster, sites)
    p, n = w.parallel, len(sites.sites)
    pipelines = p.dp * p.tp * p.cp
    size = pp_hop_bytes(w)
    crossings = pipeline_crossings(p.vp, n)
    bytes_per_step = w.micro_batches * pipelines * 2 * crossings * size
    ic = sites.interconnect
    rate = egress_rate_bytes_s(ic, pipelines)
    hop = size / (rate / pipelines) + ic.rtt_s / 2.0
    extra = max(0.0, hop - pp_hop_in_site_s(w, step))
    return bytes_per_step, 2 * p.vp * (w.micro_batches + n - 1) * extra, hop, rate
