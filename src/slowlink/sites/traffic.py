"""Bytes that cross the long haul per step, per sync method, and the round trips they wait for.

A DP group of ``n`` ranks spread over ``N`` sites, laid out site after site (each site's ranks together), reduces
``S`` bytes of gradient. Per site, leaving it (its egress), per reduction:

  flat ring (ddp)        2 (n - 1) / n x S   one ring edge leaves each site and every edge carries the ring's
                                             2 (n - 1) / n x S (nccl-tests PERFORMANCE.md, ring all-reduce);
                                             2 (n - 1) sequential steps, each crossing a site boundary
  hierarchical           2 (N - 1) / N x S   reduce-scatter inside the site (each of its ranks keeps 1/n_s of S),
                                             a ring all-reduce of each 1/n_s share across the N sites, all-gather
                                             inside: n_s x 2 (N - 1) / N x S / n_s leaves the site; 2 (N - 1) steps
                                             cross (NeMo / Megatron-Core multi-data-centre training, 2025)
  diloco, every H steps  2 (N - 1) / N x S'  the pseudo-gradient S' (the parameters' bytes in sync.outer_dtype)
                                             all-reduced hierarchically across sites once per H inner steps
                                             (Douillard et al. 2023, Algorithm 1): 1/H of it per step
  streaming-diloco       the same bytes per H steps, as F fragments of S'/F, one every H/F steps
                         (Douillard et al. 2025, Sec. 2.1)

Sizes of the pseudo-gradient's element types: ``units.PRECISION_BYTES``, int8 one byte, fp4 half a byte (E2M1,
E3M0: four bits).
"""

from __future__ import annotations

from dataclasses import dataclass

from slowlink.errors import SpecError
from slowlink.spec.workload import Sync
from slowlink.units import DTYPE_BYTES, PRECISION_BYTES

OUTER_DTYPE_BYTES: dict[str, float] = {**PRECISION_BYTES, "int8": float(DTYPE_BYTES["int8"]), "fp4": 0.5}


def ring_cross_site_bytes(size_bytes: float, ranks: int, sites: int) -> float:
    """Bytes leaving each site in a flat ring all-reduce of ``size_bytes`` over ``ranks`` ranks laid out site
    after site: ``2 (n - 1) / n x S`` (module docstring)."""
    _check(ranks, sites)
    return 2.0 * (ranks - 1) / ranks * size_bytes


def hierarchical_cross_site_bytes(size_bytes: float, sites: int) -> float:
    """Bytes leaving each site in a hierarchical all-reduce of ``size_bytes`` over ``sites`` sites:
    ``2 (N - 1) / N x S`` however many ranks each site holds (module docstring)."""
    _check(sites, sites)
    return 2.0 * (sites - 1) / sites * size_bytes


def _check(ranks: int, sites: int) -> None:
    if sites < 2 or ranks < sites:
        raise SpecError(f"a cross-site all-reduce needs sites ({sites}) >= 2 and ranks ({ranks}) >= sites")


@dataclass(frozen=True)
class SyncTraffic:
    """One sync of a method: bytes leaving each site, syncs per step, sequential crossings (each waits one-way
    latency), connections each site's egress holds at once, and the syncs that run beside compute."""

    bytes_per_sync: float       # leaving each site, per sync (one fragment for streaming-diloco)
    syncs_per_step: float       # 1 for ddp and hierarchical, 1/H for diloco, F/H for streaming-diloco
    crossings: int              # sequential steps of the reduction that cross a site boundary
    connections: int            # cross-site connections each site's egress carries at once

    @property
    def bytes_per_step(self) -> float:
        """Bytes leaving each site per training step, averaged over a sync period."""
        return self.bytes_per_sync * self.syncs_per_step


def sync_traffic(sync: Sync, grad_bytes: float, param_count: float, dp: int, sites: int, groups: int,
                 per_site: int) -> SyncTraffic:
    """What ``sync`` sends across ``sites`` sites per sync (module docstring). ``grad_bytes``: the gradient one
    group reduces, in its communication dtype; ``param_count``: that group's parameters; ``dp`` ranks per group;
    ``groups`` groups side by side (tp x pp, each reducing its slice over dp x cp ranks); ``per_site``: the fewest
    ranks of a group in one site."""
    if sync.method == "ddp":
        return SyncTraffic(groups * ring_cross_site_bytes(grad_bytes, dp, sites), 1.0, 2 * (dp - 1), groups)
    if sync.method == "hierarchical":
        return SyncTraffic(groups * hierarchical_cross_site_bytes(grad_bytes, sites), 1.0, 2 * (sites - 1),
                           groups * per_site)
    outer = param_count * OUTER_DTYPE_BYTES[sync.outer_dtype]
    whole = groups * hierarchical_cross_site_bytes(outer, sites)
    fragments = sync.fragments if sync.method == "streaming-diloco" else 1
    return SyncTraffic(whole / fragments, fragments / sync.inner_steps, 2 * (sites - 1), groups * per_site)
