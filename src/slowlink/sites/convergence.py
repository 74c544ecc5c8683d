"""What each sync setting is published to cost in tokens-to-quality, with its source; none is invented.

Each note states the published setting and its result; a setting no source measured says so instead of guessing.
Sources: DiLoCo (Douillard et al. 2023, arXiv 2311.08105, abstract), Streaming DiLoCo (Douillard et al. 2025,
arXiv 2501.18512, abstract), INTELLECT-1 (Jaghouar et al. 2024, arXiv 2412.01152, abstract).
"""

from __future__ import annotations

from slowlink.spec.workload import Sync

DILOCO = ("DiLoCo (arXiv 2311.08105): 8 workers, H = 500, Nesterov outer optimizer, on C4 as good as fully "
          "synchronous training while communicating 500 times less (its abstract)")
STREAMING = ("Streaming DiLoCo (arXiv 2501.18512): fragments synced in turn, overlapped with inner steps and "
             "quantised to 4-bit floats, learning quality similar to data-parallel training with about two orders "
             "of magnitude less bandwidth (its abstract)")
INTELLECT = ("INTELLECT-1 (arXiv 2412.01152): 10B parameters, H = 100, int8 pseudo-gradients, 1T tokens, "
             "'comparable performance' with 400x less bandwidth than data parallel; no matched data-parallel run "
             "at 10B is published, so no tokens-to-quality cost")
# The settings each source ran: (method, H, outer dtype) -> source (DiLoCo's pseudo-gradient type is taken as
# fp32, full precision, as it states no quantisation).
PUBLISHED = {("diloco", 500, "fp32"): DILOCO, ("diloco", 100, "int8"): INTELLECT}


def convergence_note(sync: Sync) -> str:
    """The published tokens-to-quality cost of ``sync``, or what is published nearest it and that this setting
    has no published figure."""
    if sync.method in ("ddp", "hierarchical"):
        return ("none: every step syncs the full gradient, the same arithmetic as one site "
                + ("(a flat all-reduce)" if sync.method == "ddp" else "(summed in another order)"))
    key = (sync.method, sync.inner_steps, sync.outer_dtype)
    if key in PUBLISHED:
        return PUBLISHED[key]
    if sync.method == "streaming-diloco" and sync.outer_dtype in ("fp4", "fp32"):
        return (f"{STREAMING}; no published tokens-to-quality figure for H = {sync.inner_steps}, "
                f"{sync.fragments} fragments, {sync.overlap_steps} overlapped steps here")
    return (f"no published tokens-to-quality figure for {sync.method} at H = {sync.inner_steps} with "
            f"{sync.outer_dtype} pseudo-gradients; published: {DILOCO}; {INTELLECT}")
