"""The checkpoint model's sealed checkpoints (checkpoint.verified): where the digest's time goes, per mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from slowlink.spec.cluster import load_cluster
from slowlink.spec.workload import load_workload

EX = Path(__file__).resolve().parents[2] / "examples"
def test_a_verified_checkpoint_pays_its_digest_where_the_mode_puts_it() -> None:
    """checkpoint.verified (issue 38): a sealed checkpoint's SHA-256 digest (benchmarks/digest_rate.py) is on the
    step's critical path in sync mode, in the drain in async mode, and before every restore."""
    from dataclasses import replace

    from slowlink.storage.checkpoint import SHA256_BYTES_S_PER_CORE, checkpoint_cost, rank_bytes

    w, c = load_workload(EX / "llama3-8b-storage.yaml"), load_cluster(EX / "ref-64gpu.yaml")
    assert w.checkpoint is not None
    for mode in ("sync", "async"):
        plain_w = replace(w, checkpoint=replace(w.checkpoint, mode=mode, verified=False))
        sealed_w = replace(w, checkpoint=replace(w.checkpoint, mode=mode, verified=True))
        plain, sealed = checkpoint_cost(plain_w, c, 1.0), checkpoint_cost(sealed_w, c, 1.0)
        write, read = rank_bytes(plain_w, plain.size, plain.layout)
        dw, dr = float(write.max()) / SHA256_BYTES_S_PER_CORE, float(read.max()) / SHA256_BYTES_S_PER_CORE
        assert sealed.restore_s == pytest.approx(plain.restore_s + dr)
        if mode == "sync":
            assert sealed.blocking_s == pytest.approx(plain.blocking_s + dw) and sealed.drain_s == plain.drain_s
        else:
            assert sealed.blocking_s == plain.blocking_s and sealed.drain_s == pytest.approx(plain.drain_s + dw)
