"""A real Prometheus server scrapes `slowlink exporter` on localhost and evaluates monitoring/slowlink.rules.yml:
the busbw-regression alerts fire. Once from nccl-tests files (needs only prometheus), once from a real gloo
benchmark on the emulated cluster before and after one link is shaped to half its rate (root, netns, slow).

The rules' ``for:`` durations (minutes, for production) are shortened to seconds in the test's copy; the
expressions, labels and thresholds are the file's own.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slowlink.observe.exporter import serve

DATA = Path(__file__).parents[1] / "data" / "observe"
MONITORING = Path(__file__).parents[2] / "monitoring"
EX = Path(__file__).parents[2] / "examples"
pytestmark = [pytest.mark.prometheus,
              pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus not installed")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> Any:
    return json.loads(urllib.request.urlopen(url, timeout=5).read().decode())


class Prometheus:
    """A prometheus server in a temp dir scraping ``target`` every second, rules evaluated every second."""

    def __init__(self, tmp: Path, target: str) -> None:
        rules = re.sub(r"for: \d+[smh]", "for: 2s", (MONITORING / "slowlink.rules.yml").read_text())
        (tmp / "rules.yml").write_text(rules)
        (tmp / "prometheus.yml").write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            "rule_files: [rules.yml]\n"
            f"scrape_configs:\n  - job_name: slowlink\n    static_configs: [{{targets: ['{target}']}}]\n")
        self.port = _free_port()
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def firing(self, timeout_s: float = 90) -> list[dict[str, Any]]:
        """The alerts firing, polled until one fires or ``timeout_s`` passes."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"prometheus exited: {self.proc.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
            try:
                alerts = _get(f"http://127.0.0.1:{self.port}/api/v1/alerts")["data"]["alerts"]
            except OSError:
                alerts = []
            got = [a for a in alerts if a["state"] == "firing"]
            if got:
                return got
            time.sleep(1)
        return []

    def query(self, expr: str) -> list[dict[str, Any]]:
        q = urllib.parse.quote(expr)
        return _get(f"http://127.0.0.1:{self.port}/api/v1/query?query={q}")["data"]["result"]  # type: ignore[no-any-return]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture
def exporter_and_prometheus(tmp_path: Path) -> Iterator[Any]:
    servers: list[Any] = []

    def start(inputs: list[Path], baseline: Path) -> Prometheus:
        server = serve(0, inputs, baseline)
        prom = Prometheus(tmp_path, f"127.0.0.1:{server.server_port}")
        servers.extend([server, prom])
        return prom

    yield start
    for s in servers:
        s.stop() if isinstance(s, Prometheus) else s.shutdown()


def test_alert_fires_from_nccl_tests_files(exporter_and_prometheus: Any) -> None:
    """nccl-tests on sockets (6 GB/s) against an IB baseline (352 GB/s): critical and warning both fire."""
    prom = exporter_and_prometheus([DATA / "nccl-tests-2.13-all_reduce-2x8-h100-socket.txt"],
                                   DATA / "nccl-tests-2.13-all_reduce-2x8-h100.txt")
    names = set()
    end = time.monotonic() + 90
    while names != {"SlowlinkBusbwBelowBaseline", "SlowlinkBusbwCollapsed"} and time.monotonic() < end:
        names = {a["labels"]["alertname"] for a in prom.firing()}
    assert names == {"SlowlinkBusbwBelowBaseline", "SlowlinkBusbwCollapsed"}


def _bench(plan: Any, results: Path) -> Path:
    from slowlink.emulate import net

    codes = net.run(plan, [sys.executable, "-m", "slowlink", "bench", "collectives", "-b", "2MiB", "-e", "2MiB",
                           "-n", "2", "-w", "1", "--rounds", "1", "--backend", "gloo", "--results", str(results)],
                    timeout_s=300)
    assert codes == [0] * len(plan.nodes), codes
    (rec,) = results.glob("*.json")
    return rec


@pytest.mark.netns
@pytest.mark.slow
def test_alert_fires_from_a_degraded_emulated_benchmark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        exporter_and_prometheus: Any) -> None:
    """2 emulated nodes at 100 Mbit/s: a gloo all_reduce sweep as baseline; n1 shaped to 50 Mbit/s; the same
    sweep again is written where the exporter looks; Prometheus fires the busbw-regression alert."""
    from slowlink.emulate import net
    from slowlink.emulate.plan import build_plan
    from slowlink.spec.cluster import load_cluster

    monkeypatch.setattr(net, "STATE_DIR", tmp_path / "state")
    plan = net.up(build_plan(load_cluster(EX / "emulate-flat.yaml"), nodes=2, run_id=f"ob{secrets.token_hex(2)}"))
    try:
        base = _bench(plan, tmp_path / "baseline")
        plan = net.set_rate(plan, "n1", plan.node_rate_bytes_s / 2)
        degraded = _bench(plan, tmp_path / "results")
        prom = exporter_and_prometheus([degraded.parent], base)
        alerts = prom.firing()
        ratio = prom.query("slowlink_collective_largest_busbw_ratio")
    finally:
        net.down(plan.run_id)
    assert alerts and {a["labels"]["alertname"] for a in alerts} <= {"SlowlinkBusbwBelowBaseline",
                                                                    "SlowlinkBusbwCollapsed"}
    assert any(a["labels"]["alertname"] == "SlowlinkBusbwBelowBaseline" and a["labels"]["op"] == "all_reduce"
               for a in alerts) or any(a["labels"]["alertname"] == "SlowlinkBusbwCollapsed" for a in alerts)
    print("firing:", sorted(a["labels"]["alertname"] for a in alerts), "ratio:", ratio[0]["value"][1])
    assert 0.35 < float(ratio[0]["value"][1]) < 0.7  # half the link rate, about half the busbw
