"""One configuration of a design space, evaluated: the first feasibility rule it breaks, else the numbers of
its assessment (:func:`slowlink.assess.assess`): the step with its data stall, ETTR, cost per token and the
days and cost of the token budget, as ``slowlink cost`` gives them on the design's files (``search --emit``).

Rules, in the order they are checked (the first that fails names the point's ``rule``):
  priced, fills_scale_up, fabric_fits      the hardware: every part has a price (the long haul's lease and
                                           optics too); whole scale-up domains; a 2- or 3-tier fabric of the
                                           priced switches holds the NICs
  sites_divide_nodes                       a design split over sites splits its nodes evenly
  sync_needs_sites                         a one-site design runs the space's first sync option only (the
                                           others sync nothing across sites: the same plan again)
  parallel_divides                         tp x pp x cp divides the GPUs (dp is the quotient)
  ep_divides_dp, tp_in_scale_up            ep divides dp; tp divides the scale-up domain (TP stays on NVLink)
  interleave_needs_pp, cp_divides_seq      vp > 1 needs pp > 1; seq_len is a multiple of 2 cp
  tp_divides_heads, pp_divides_layers,     the step model's own checks (:func:`~slowlink.workload.step.
  batch_divides, ep_divides_experts,       check_plan`), by the rule its error carries
  interleave_divides_batch,
  precision_supported, memory_fits,
  site_holds_replicas                      each site holds whole model replicas (:mod:`slowlink.sites.plan`)
  segment_completes                        the failure model: a run that would never finish between failures
The constraints (budget, power, GPUs, deadline) are applied afterwards (:mod:`slowlink.search.run`), so
that what each one costs can be measured. Hardware is built and priced once per chunk, and the layouts of
one design share a memo of collective prices (:func:`memo_cost`): layouts that differ only in micro-batch,
ZeRO stage, recomputation or interleaving ask the collective model the same questions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from slowlink.assess import Budget, assess
from slowlink.cost.design import Design, build_design
from slowlink.cost.model import ClusterCost, cluster_cost
from slowlink.errors import SlowlinkError, SpecError
from slowlink.search.space import Layout, Space
from slowlink.spec.cluster import Cluster
from slowlink.workload.comm import CommCost, analytical_cost, group_key

NAN = math.nan


@dataclass(frozen=True)
class Point:
    """One configuration: its index in the space, its rule ("" when the plan is feasible) and its numbers."""

    index: int
    rule: str = ""
    gpus: int = 0
    tiers: int = 0
    dp: int = 0
    capex_usd: float = NAN
    network_share: float = NAN
    facility_power_kw: float = NAN
    usd_per_gpu_hour: float = NAN
    tokens_per_s: float = NAN
    usd_per_million_tokens: float = NAN
    days: float = NAN
    run_usd: float = NAN
    step_time_s: float = NAN      # with the data stall
    data_stall_s: float = NAN
    ettr: float = NAN             # 1 where failures are not priced (no storage: in the space)
    failures_priced: bool = False
    bottleneck: str = field(default="", compare=False)


def memo_cost(cluster: Cluster) -> CommCost:
    """The analytical :data:`~slowlink.workload.comm.CommCost` of ``cluster``, memoised on (op, size, groups),
    the groups named by value (:func:`~slowlink.workload.comm.group_key`: their layout and dimension)."""
    price = analytical_cost(cluster)
    memo: dict[tuple[str, float, object], float] = {}

    def cost(op: str, size_bytes: float, groups: Sequence[list[int]]) -> float:
        key = (op, size_bytes, group_key(groups))
        hit = memo.get(key)
        if hit is None:
            hit = memo[key] = price(op, size_bytes, groups)
        return hit

    return cost


def _layout_rule(space: Space, cluster: Cluster, lay: Layout) -> str:
    """The first cheap divisibility rule ``lay`` breaks on ``cluster`` ("" if none)."""
    if cluster.gpus % lay.model_parallel:
        return "parallel_divides"
    if (cluster.gpus // lay.model_parallel) % lay.ep:
        return "ep_divides_dp"
    if cluster.scale_up.domain_gpus % lay.tp:
        return "tp_in_scale_up"
    if lay.vp > 1 and lay.pp == 1:
        return "interleave_needs_pp"
    if lay.cp > 1 and space.workload.model.seq_len % (2 * lay.cp):
        return "cp_divides_seq"
    if cluster.sites is None and space.syncs and lay.sync != space.syncs[0]:
        return "sync_needs_sites"
    return ""


def _point(space: Space, index: int, cluster: Cluster, cost: ClusterCost, comm: CommCost,
           lay: Layout) -> Point:
    rule = _layout_rule(space, cluster, lay)
    dp = cluster.gpus // lay.model_parallel
    base = Point(index, rule, cluster.gpus, cluster.fabric.tiers, dp)
    if rule:
        return base
    try:
        a = assess(space.workload_of(lay, dp), cluster, budget=Budget(tokens=space.tokens), prices=space.prices,
                   comm=comm, full=False, hardware=cost)
    except SlowlinkError as exc:
        return replace(base, rule=exc.rule)
    never = next((u for u in a.unpriced if u.rule == "segment_completes"), None)
    if never is not None:  # a run that would never finish between failures is no design
        return replace(base, rule=never.rule)
    tc = a.token_cost
    if tc is None or a.run_days is None or a.run_usd is None:  # the hardware was priced above, with a budget
        raise RuntimeError(f"configuration {index}: unpriced after pricing ({a.unpriced})")
    return replace(base, capex_usd=cost.total_capex_usd, network_share=cost.network_share,
                   facility_power_kw=cost.facility_power_w / 1e3, usd_per_gpu_hour=cost.usd_per_gpu_hour,
                   tokens_per_s=a.tokens_per_s, usd_per_million_tokens=tc.usd_per_million_tokens,
                   days=a.run_days, run_usd=a.run_usd, step_time_s=a.step_time_s, data_stall_s=a.data_stall_s,
                   ettr=a.ettr, failures_priced=a.failures is not None, bottleneck=a.bottleneck)


def evaluate_hardware(space: Space, hardware: list[int]) -> list[Point]:
    """Every configuration of the hardware designs ``hardware`` (indices into ``space.hardware``)."""
    points = []
    n = len(space.layouts)
    for h in hardware:
        design: Design = space.hardware[h]
        try:
            cluster = build_design(design, space.prices, space.shared)
            cost = cluster_cost(cluster, space.prices)
        except SpecError as exc:
            points += [Point(h * n + i, exc.rule) for i in range(n)]
            continue
        comm = memo_cost(cluster)
        points += [_point(space, h * n + i, cluster, cost, comm, space.layout(i)) for i in range(n)]
    return points
