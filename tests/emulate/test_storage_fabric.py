"""The model side of the emulated storage-fabric experiment (the namespaces need root and run in
benchmarks/emulate_storage_converged.py): the same two-node cluster, converged and separate."""

from __future__ import annotations

import pytest

from slowlink.emulate.storage_fabric import FabricRun, model_cluster
from slowlink.storage.converged import checkpoint_slowdown


@pytest.mark.parametrize("converged, want", [(True, 2.0), (False, 1.0)])
def test_flow_model_halves_the_allreduce_only_when_converged(converged: bool, want: float) -> None:
    c = model_cluster(converged, 0.1, 0.025)  # 100 Mbit/s NICs, storage at twice one NIC
    assert c.storage is not None and c.storage.shared_with_compute is converged
    assert checkpoint_slowdown(c, 1000 * 2**20, 2**20).slowdown == pytest.approx(want, rel=0.01)


def test_fabric_run_error_is_relative_to_the_measured_slowdown() -> None:
    r = FabricRun("converged", alone_s=1.0, with_checkpoint_s=2.5, predicted_slowdown=2.0)
    assert r.slowdown == 2.5 and r.error == pytest.approx(-0.2)
    assert r.to_json()["fabric"] == "converged"
