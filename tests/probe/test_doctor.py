"""doctor and inventory on the emulated cluster (root, netns, slow): one link shaped to half rate is named with
its evidence; a version mismatch injected into one node (its own /etc/os-release, which `ip netns exec`
bind-mounts from /etc/netns/NS/) is reported by the inventory, as is the shaped rate."""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path

import pytest

from slowlink.emulate import net
from slowlink.emulate.plan import build_plan
from slowlink.observe.doctor import diagnose, read_inputs
from slowlink.observe.inventory import mismatches
from slowlink.probe.doctor import inventory, probe
from slowlink.spec.cluster import load_cluster

EX = Path(__file__).parents[2] / "examples"
pytestmark = [pytest.mark.netns, pytest.mark.slow]


def test_half_rate_link_named_and_mismatch_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(net, "STATE_DIR", tmp_path)
    run_id = f"ob{secrets.token_hex(2)}"
    plan = net.up(build_plan(load_cluster(EX / "emulate-flat.yaml"), run_id=run_id))
    etc = Path("/etc/netns") / plan.nodes[2]
    try:
        net.save(plan)
        plan = net.set_rate(plan, "n1", plan.node_rate_bytes_s / 2)
        etc.mkdir(parents=True)
        (etc / "os-release").write_text('PRETTY_NAME="Debian GNU/Linux 11 (bullseye)"\n')
        diff = mismatches(inventory(run_id))
        findings = probe(run_id, EX / "emulate-flat.yaml", 0.2)
    finally:
        shutil.rmtree(etc, ignore_errors=True)
        net.down(run_id)
    assert set(diff) == {"os", "nic_shaped_mbit_s"}
    assert diff["os"]["n2"] == "Debian GNU/Linux 11 (bullseye)" and diff["nic_shaped_mbit_s"]["n1"] == ("eth0:50",)
    errors = [f for f in findings if f.severity == "error"]
    link = [f for f in errors if f.layer == "link"]
    assert len(link) == 2 and all("link n1 " in f.what for f in link)  # the shaper and the measured streams
    assert any("tbf rate 50Mbit" in e for f in link for e in f.evidence)
    assert any(f.layer == "collective" and "below the model" in f.what for f in errors)
    diag = diagnose(read_inputs([]), extra=findings)
    assert diag.exit_code == 3 and diag.findings[0].layer == "link"
