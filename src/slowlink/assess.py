"""The whole model chain for one workload on one cluster, run once: the step and its bottleneck, storage (data
stall, the checkpoint priced once), failures and goodput, cost, the advice and the model's measured accuracy.
Every command (``plan``, ``goodput``, ``cost``, ``search``, ``scale``) is a view of an :class:`Assessment`, so
the same files give the same step, ETTR and cost wherever they are asked.

  step_s     = the step model's step + the storage model's data stall per step (what failures and cost price)
  ETTR       = the failure model at the checkpoint interval it picks (slowlink.reliability.goodput);
               1 where failures cannot be priced, and ``unpriced`` says why; across sites x the share of time
               the sites' outages leave (slowlink.sites.outages)
  tokens/s   = global_batch x seq_len / step_s
  $/M tokens = $/hour / (tokens/s x 3600 x ETTR) x 1e6                 (slowlink.cost.model)
  days, $    = the goodput model's wall time of the token budget, and $/hour over it
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from slowlink import units
from slowlink.errors import FabricMisfit, PriceMissing, SlowlinkError, SpecError
from slowlink.spec.cluster import Cluster
from slowlink.spec.workload import Workload

if TYPE_CHECKING:
    from slowlink.cost.model import ClusterCost, TokenCost
    from slowlink.reliability.goodput import Failures, Goodput
    from slowlink.sites.outages import SiteOutages
    from slowlink.sites.plan import CrossSite
    from slowlink.spec.prices import PriceBook
    from slowlink.storage.plan import StoragePlan
    from slowlink.straggler.degraded import PlanStragglers
    from slowlink.workload.accuracy import Accuracy
    from slowlink.workload.advice import Advice
    from slowlink.workload.comm import CommCost
    from slowlink.workload.step import StepResult

PARTS = ("storage", "failures", "cost", "time_to_train")  # the parts an assessment may leave unpriced, in order
FAILURES_UNPRICED = ("storage_given", "segment_completes")  # refusals of the failure model that leave it unpriced


@dataclass(frozen=True)
class Unpriced:
    """A part of the chain that could not be priced (``part``: one of :data:`PARTS`), why, and the rule id of
    what refused it (``priced``, ``fabric_fits``, ``storage_given``, ``segment_completes``, ``budget_given``)."""

    part: str
    why: str
    rule: str

    def sentence(self) -> str:
        return f"{self.part.replace('_', ' ')}: not priced: {self.why}"

    def to_json(self) -> dict[str, str]:
        return {"part": self.part, "why": self.why, "rule": self.rule}

    def error(self) -> SpecError:
        """The refusal of a command that needs this part (goodput without failures, cost without prices)."""
        return SpecError(self.why, rule=self.rule)


@dataclass(frozen=True)
class Budget:
    """What the run trains: a token budget or a number of steps (None: neither was given)."""

    tokens: float | None = None
    steps: int | None = None

    @property
    def given(self) -> bool:
        return self.tokens is not None or self.steps is not None


@dataclass(frozen=True)
class Assessment:
    """One workload on one cluster, every model's answer (module docstring for how they join)."""

    cluster: Cluster
    workload: Workload              # dp resolved on the cluster
    fidelity: str
    step: StepResult
    storage: StoragePlan
    failures: Failures | None       # None where failures cannot be priced (``unpriced`` says why)
    hardware: ClusterCost | None    # None where the price book lacks a part (``unpriced`` says why)
    budget: Budget                  # the run's tokens or steps, as given (workload's training.tokens included)
    advice: tuple[Advice, ...]
    accuracy: Accuracy
    stragglers: PlanStragglers | None  # degraded parts' cost and the jitter (None: a uniform cluster, or not asked)
    unpriced: tuple[Unpriced, ...]
    cross_site: CrossSite | None = None  # the long haul between sites (None: a one-site cluster)
    outages: SiteOutages | None = None  # lost links and sites (None: one site, or failures not priced)

    @property
    def data_stall_s(self) -> float:
        return self.storage.data_stall_s or 0.0

    @property
    def step_time_s(self) -> float:
        """Seconds per step with the data stall: what failures and cost price."""
        return self.storage.run_step_s

    @property
    def tokens_per_s(self) -> float:
        return self.workload.tokens_per_step / self.step_time_s

    @property
    def ettr(self) -> float:
        """The failure model's ETTR, x the sites' outages' share of time where they are priced."""
        if self.failures is None:
            return 1.0
        return self.failures.ettr * (1.0 if self.outages is None else self.outages.ettr)

    @functools.cached_property
    def goodput(self) -> Goodput | None:
        """The goodput of the budget: days, GPU-hours, losses, Monte Carlo and sweeps (None without a budget or
        where failures cannot be priced); worked out when first asked for."""
        if self.failures is None or not self.budget.given:
            return None
        from slowlink.reliability.goodput import goodput

        g = goodput(self.workload, self.cluster, self.step, self.storage, self.budget.tokens, self.budget.steps,
                    self.failures)
        return g if self.outages is None else g.with_site_outages(self.outages.ettr)

    @property
    def bottleneck(self) -> str:
        """The largest wait in words: storage's where it waits longer than any communication, else the step's."""
        return self.storage.sentence() if self.storage.dominates else self.step.bottleneck

    @property
    def ettr_basis(self) -> str:
        """How the throughput is priced: after failures (the ETTR, MTTF and interval), or before them and why."""
        f = self.failures
        if f is None:
            from slowlink.cost.model import BEFORE_FAILURES

            return f"{BEFORE_FAILURES} ({self.why('failures')})"
        sites = "" if self.outages is None else f", x {self.outages.ettr:.4f} for the sites' outages"
        return (f"x ETTR {self.ettr:.4f} (MTTF {f.mttf_h:.3g} h at {f.gpus} GPUs, a checkpoint every "
                f"{f.interval_s:.0f} s{sites})")

    @property
    def token_cost(self) -> TokenCost | None:
        """Cost per token at :attr:`tokens_per_s` x :attr:`ettr` (None where the hardware is not priced)."""
        from slowlink.cost.model import TokenCost

        if self.hardware is None:
            return None
        return TokenCost(self.hardware, self.tokens_per_s, self.step_time_s,
                         None if self.failures is None else self.ettr)

    @functools.cached_property
    def _run(self) -> tuple[int, float] | None:
        """(steps, tokens) of the budget (:func:`~slowlink.reliability.goodput.budget_steps`), None without one."""
        from slowlink.reliability.goodput import budget_steps

        b = self.budget
        return budget_steps(self.workload, b.tokens, b.steps) if b.given else None

    @property
    def steps(self) -> int | None:
        """Steps of the run's budget: as given, or ceil(tokens / tokens per step); None without a budget."""
        return None if self._run is None else self._run[0]

    @property
    def tokens(self) -> float | None:
        """Tokens of the run's budget (its steps x tokens per step when given as steps; None without one)."""
        return None if self._run is None else self._run[1]

    @property
    def run_days(self) -> float | None:
        """Days to train the budget: its steps' wall time under failures (the goodput model's), or with ETTR 1
        where failures are not priced; None without a budget."""
        if self.steps is None:
            return None
        return self.steps * self.step_time_s / self.ettr / units.DAY

    @property
    def run_usd(self) -> float | None:
        """USD of training the budget: $/hour over :attr:`run_days`."""
        days = self.run_days
        if days is None or self.hardware is None:
            return None
        return self.hardware.usd_per_hour * days * units.DAY / units.HOUR

    def why(self, part: str) -> str:
        """Why ``part`` is not priced ("" when it is)."""
        return next((u.why for u in self.unpriced if u.part == part), "")

    def to_json(self) -> dict[str, object]:
        """``slowlink plan --json`` of one cluster: the step, its advice, storage, degraded parts and jitter,
        goodput (with a budget), the accuracy, the cost at this step and ETTR, and what was not priced."""
        js: dict[str, object] = self.step.to_json() | {"advice": [x.to_json() for x in self.advice],
                                                        "storage": self.storage.to_json()}
        if self.stragglers is not None:
            js |= self.stragglers.to_json()
        if self.cross_site is not None:
            js["cross_site"] = self.cross_site.to_json()
        if self.outages is not None:
            js["site_outages"] = self.outages.to_json()
        if self.budget.given:
            js["goodput"] = {"unavailable": self.why("failures")} if self.goodput is None else self.goodput.to_json()
        return js | {"stack": self.workload.stack.to_json(), "accuracy": self.accuracy.to_json(),
                     "cost": self.cost_json(), "unpriced": [u.to_json() for u in self.unpriced]}

    def cost_json(self) -> dict[str, object]:
        """``plan --json``'s ``cost``: $/hour, $/GPU-hour, capex and $/M tokens at this step and ETTR, with the
        budget's days and USD; ``{"unavailable": why}`` where the hardware is not priced."""
        tc = self.token_cost
        if tc is None:
            return {"unavailable": self.why("cost")}
        out: dict[str, object] = {
            "capex_usd": tc.cost.total_capex_usd, "network_share": tc.cost.network_share,
            "usd_per_hour": tc.cost.usd_per_hour, "usd_per_gpu_hour": tc.cost.usd_per_gpu_hour,
            "step_time_s": self.step_time_s, "tokens_per_s": self.tokens_per_s, "ettr": self.ettr,
            "usd_per_million_tokens": tc.usd_per_million_tokens, "ettr_basis": self.ettr_basis}
        return out | self.run_json()

    def priced_token_cost(self) -> TokenCost:
        """:attr:`token_cost` for a command that cannot answer without it: the cost's refusal where the hardware
        is not priced (no price for a part, a fabric the switches cannot build)."""
        tc = self.token_cost
        if tc is None:
            raise next(u for u in self.unpriced if u.part == "cost").error()
        return tc

    def priced_json(self) -> dict[str, object]:
        """``slowlink cost --json``: the hardware's cost and the cost per token (:meth:`TokenCost.to_json`), the
        budget's days and USD, the bottleneck, the ETTR's basis, the data stall and what was not priced; raises
        the cost's refusal where the hardware is not priced."""
        return self.priced_token_cost().to_json() | self.run_json() | {
            "bottleneck": self.bottleneck, "ettr_basis": self.ettr_basis, "data_stall_s": self.data_stall_s,
            "unpriced": [u.to_json() for u in self.unpriced]}

    def run_json(self) -> dict[str, object]:
        """The budget's ``tokens``, ``days`` and ``run_usd`` (``plan --json``'s ``cost`` and ``cost --json``);
        nothing without a budget or a price."""
        if self.run_days is None or self.run_usd is None:
            return {}
        return {"tokens": self.tokens, "days": self.run_days, "run_usd": self.run_usd}


def assess(w: Workload, cluster: Cluster, *, budget: Budget | None = None, prices: PriceBook | None = None,
           fidelity: str = "analytical", comm: CommCost | None = None, check_memory: bool = True,
           full: bool = True, hardware: ClusterCost | None = None) -> Assessment:
    """Run the chain for ``w`` on ``cluster`` (module docstring).

    ``budget`` defaults to the workload's ``training.tokens``; ``prices`` to the bundled price book;
    ``comm`` prices the collectives (default: the model of ``fidelity``); ``hardware`` is the cluster's cost when
    the caller has priced it with ``prices`` already (a search's layouts share it); ``check_memory`` False plans
    what the memory model says does not fit (published runs that did); ``full`` False leaves out what a design
    search does not rank by (advice and the degraded-part re-plans). Raises
    :class:`~slowlink.errors.InfeasiblePlan` (with its rule) when the step cannot run; a part that cannot be priced
    is in ``unpriced``, not an error.
    """
    from slowlink.sim.fidelity import comm_cost
    from slowlink.storage.plan import plan_storage
    from slowlink.workload.accuracy import accuracy
    from slowlink.workload.step import fit_dp, plan

    w = fit_dp(w, cluster)
    stepping, paced_by = cluster, None  # the cluster the step model runs on (a site's own fabric may set it)
    if cluster.sites is None:
        price = comm if comm is not None else comm_cost(fidelity, cluster)
        step = plan(w, cluster, price, check_memory=check_memory)
    else:  # the step as one site would run it, on the slowest of the sites' fabrics: the flow simulator's graph
        # of a cluster with sites has the long haul in it, which the cross-site part below prices
        from slowlink.sites.plan import fabric_variants

        runs = []
        for names, one in fabric_variants(cluster):
            p1 = comm if comm is not None and not cluster.site_fabrics else comm_cost(fidelity, one)
            runs.append((plan(w, one, p1, check_memory=check_memory), names, one, p1))
        step, names, stepping, price = max(runs, key=lambda r: r[0].step_time_s)
        paced_by = names if cluster.site_fabrics else None
    cross, alone = None, step  # alone: the step as one site would run it (what the advice re-runs compare with)
    if cluster.sites is not None:  # the step waits for the long haul too
        from slowlink.sites.plan import cross_site, with_cross_site

        cross = cross_site(w, cluster, step)
        if cross is not None and paced_by is not None:
            cross = replace(cross, paced_by=paced_by)
        step = step if cross is None else with_cross_site(step, cross)
    storage = plan_storage(w, cluster, step)
    b = budget if budget is not None and budget.given else Budget(tokens=_count(w.training.tokens))
    unpriced: list[Unpriced] = []
    if cluster.storage is None and (w.data is not None or w.checkpoint is not None):
        unpriced.append(_no_storage(w, cluster))
    fail = _failures(w, cluster, storage, unpriced)
    if fail is not None:  # one checkpoint interval for the whole chain: the one the failure model uses
        storage = storage.at_interval(fail.interval_s)
    outages = None
    if cross is not None and fail is not None:
        from slowlink.sites.outages import Recovery, site_outages

        rec = Recovery(fail.model.transport_detect_s, fail.recovery.restart_s, fail.recovery.restore_s,
                       fail.interval_s)
        outages = site_outages(w, cluster, step, alone, cross, rec)
        if outages is not None and outages.ettr <= 0:  # the outages leave no time to train
            unpriced.append(Unpriced("failures", "the sites' outages cost all of the wall time: "
                                     + "; ".join(f"{o.what} {o.share:.0%}" for o in outages.outages),
                                     "segment_completes"))
            fail, outages = None, None
    if hardware is None:
        hardware = _hardware(cluster, prices, unpriced)
    elif not hardware.complete:  # a partial bill (cost, bom): priced as far as it goes, every gap said
        unpriced.append(Unpriced("cost", "; ".join(hardware.excluded) + ": the bill and the cost per token exclude "
                                 + ("it" if len(hardware.excluded) == 1 else "them"), "priced"))
    if not b.given:
        from slowlink.reliability.goodput import NO_BUDGET

        unpriced.append(Unpriced("time_to_train", NO_BUDGET, "budget_given"))
    advice: tuple[Advice, ...] = ()
    stragglers: PlanStragglers | None = None
    if full:
        from slowlink.workload.advice import advise

        advice = tuple(advise(w, stepping, alone, price, check_memory=check_memory,
                              bottleneck="storage" if storage.dominates else None))
        if cross is not None:  # what to change across sites, against the step with the long haul in it
            from slowlink.sites.advice import site_advice
            from slowlink.workload.advice import MIN_GAIN

            held = tuple(replace(a, base_s=a.base_s + cross.exposed_s, step_time_s=a.step_time_s + cross.exposed_s,
                                 gain=1.0 - (a.step_time_s + cross.exposed_s) / (a.base_s + cross.exposed_s))
                         for a in advice)  # a one-site change, the long haul's exposed seconds held as planned
            held = tuple(a for a in held if a.gain > MIN_GAIN)
            advice = (*site_advice(w, cluster, alone, cross), *held)
        if cluster.degraded or cluster.variability is not None:
            from slowlink.straggler.degraded import plan_stragglers

            stragglers = plan_stragglers(w, cluster, fidelity, step)
    acc = accuracy(cluster.gpu.name, w.parallel.tp, w.parallel.zero == 3, w.stack.name)
    order = sorted(unpriced, key=lambda u: PARTS.index(u.part))
    return Assessment(cluster, w, fidelity, step, storage, fail, hardware, b, advice, acc, stragglers,
                      tuple(order), cross, outages)


def _no_storage(w: Workload, cluster: Cluster) -> Unpriced:
    """The workload describes its data or checkpoints, but the cluster has no storage to read or write them."""
    sections = " and ".join(f"{s}:" for s, v in (("data", w.data), ("checkpoint", w.checkpoint)) if v is not None)
    return Unpriced("storage", f"cluster {cluster.name}: storage (None): the workload's {sections} need the "
                    "cluster's storage: section (its read and write bandwidth, metadata rate): without it the data "
                    "stall is taken as 0 (only a decode-bound reader is priced) and the checkpoint's write and restore "
                    "are not priced", "storage_given")


def _failures(w: Workload, cluster: Cluster, storage: StoragePlan, unpriced: list[Unpriced]) -> Failures | None:
    """The failure model at this step, or None (and why) where the checkpoint cannot be priced (no storage and no
    overrides) or the run would never finish between failures (a checkpoint interval far past the MTTF)."""
    from slowlink.reliability.goodput import failures

    try:
        return failures(w, cluster, storage)
    except SlowlinkError as exc:
        if exc.rule not in FAILURES_UNPRICED:
            raise
        unpriced.append(Unpriced("failures", str(exc), exc.rule))
        return None


def _hardware(cluster: Cluster, prices: PriceBook | None, unpriced: list[Unpriced]) -> ClusterCost | None:
    from slowlink.cost.model import cluster_cost
    from slowlink.cost.prices import load_prices

    try:
        return cluster_cost(cluster, prices if prices is not None else load_prices(None))
    except (PriceMissing, FabricMisfit) as exc:
        unpriced.append(Unpriced("cost", str(exc), exc.rule))
        return None


def _count(tokens: float | int | str | None) -> float | None:
    """``training.tokens`` as the schema leaves it: a count already parsed (15T -> 1.5e13), or None."""
    return None if tokens is None else float(tokens)
