"""Scenario files: validation errors name the field; two jobs on shared spines slow each other."""

from __future__ import annotations

from pathlib import Path

import pytest

from slowlink.errors import SpecError
from slowlink.sim.scenario import load_scenario, run_scenario

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _write(tmp_path: Path, body: str) -> Path:
    (tmp_path / "c.yaml").write_text((EXAMPLES / "fat2-oversub-4to1.yaml").read_text())
    p = tmp_path / "s.yaml"
    p.write_text("cluster: c.yaml\n" + body)
    return p


def test_two_jobs_on_shared_spines_slow_each_other() -> None:
    spec, cluster = load_scenario(EXAMPLES / "scenario-two-jobs.yaml")
    res = run_scenario(spec, cluster)
    for t in res.traffic:
        assert t.duration_s > 1.2 * t.alone_s


@pytest.mark.parametrize(("body", "needle"), [
    ("traffic: []\n", "traffic ([]):"),
    ("traffic:\n  - {name: a, kind: gossip}\n", "traffic.0.kind ('gossip')"),
    ("traffic:\n  - {name: a, kind: collective, op: all_reduce, size: 1 parsec}\n", "traffic.0.size"),
    ("traffic:\n  - {name: a, kind: collective, op: all_reduce, size: 1GiB, colour: red}\n",
     "traffic.0.colour: unknown key"),
    ("traffic:\n  - {name: a, kind: collective, size: 1GiB}\n", "traffic.0: op (None)"),
    ("traffic:\n  - {name: a, kind: collective, op: all_reduce, size: 1GiB, ranks: [0, 999]}\n",
     "traffic.0.ranks ([0, 999])"),
    ("traffic:\n  - {name: a, kind: collective, op: all_reduce, size: 1GiB, first_rank: 100, count: 64}\n",
     "traffic.0: first_rank (100) + count (64)"),
    ("traffic:\n  - {name: a, kind: checkpoint}\n", "traffic.0.bytes_per_node (None)"),
    ("traffic:\n  - {name: a, kind: checkpoint, bytes_per_node: 1GB}\n", "storage (None)"),
])
def test_bad_scenarios_name_the_field(tmp_path: Path, body: str, needle: str) -> None:
    with pytest.raises(SpecError) as exc:
        spec, cluster = load_scenario(_write(tmp_path, body))
        run_scenario(spec, cluster)
    assert needle in str(exc.value)
