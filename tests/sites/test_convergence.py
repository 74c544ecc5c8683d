"""Convergence notes: the published settings are quoted with their source; any other says none is published."""

from __future__ import annotations

import pytest

from slowlink.sites.convergence import convergence_note
from slowlink.spec.workload import Sync


@pytest.mark.parametrize(("sync", "needles"), [
    (Sync("ddp"), ["none: every step syncs the full gradient"]),
    (Sync("hierarchical"), ["none:"]),
    (Sync("diloco", 500), ["arXiv 2311.08105", "H = 500", "500 times less"]),
    (Sync("diloco", 100, outer_dtype="int8"), ["arXiv 2412.01152", "int8", "no tokens-to-quality cost"]),
    (Sync("diloco", 50, outer_dtype="fp8"), ["no published tokens-to-quality figure for diloco at H = 50 with fp8"]),
    (Sync("streaming-diloco", 100, outer_dtype="fp4", fragments=10, overlap_steps=5),
     ["arXiv 2501.18512", "no published tokens-to-quality figure for H = 100, 10 fragments"]),
])
def test_notes_quote_a_source_or_say_none_is_published(sync: Sync, needles: list[str]) -> None:
    note = convergence_note(sync)
    for n in needles:
        assert n in note, note
