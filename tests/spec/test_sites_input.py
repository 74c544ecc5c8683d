"""Bad sites:, interconnect: and sync: sections: each exits 2 naming the file, the field, the value and the rule."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from slowlink import units
from slowlink.spec.cluster import load_cluster

EX = Path(__file__).parents[2] / "examples"
TWO = EX / "two-site-1000km.yaml"
LLAMA = EX / "llama3-8b.yaml"


def _file(tmp_path: Path, src: Path, name: str, **changes: Any) -> str:
    data = yaml.safe_load(src.read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data))
    return str(p)


def test_the_example_resolves_in_si_units() -> None:
    c = load_cluster(TWO)
    assert c.sites is not None
    ic = c.sites.interconnect
    assert c.sites.names == ("east", "west") and [s.nodes for s in c.sites.sites] == [4, 4]
    assert ic.link_bytes_s == 400 * units.Gbit and ic.egress_bytes_s == 2 * 400 * units.Gbit
    assert ic.rtt_s == pytest.approx(0.010) and ic.window_bytes == 64 * units.MiB
    assert ic.bdp_bytes == pytest.approx(800e9 / 8 * 0.010)  # 1 GB in flight fills 800 Gbit/s for 10 ms
    assert ic.segment_bytes == 1448 and ic.streams_per_connection == 4


def test_defaults_by_transport(tmp_path: Path) -> None:
    tcp = load_cluster(_file(tmp_path, TWO, "t.yaml", interconnect={"links": 1, "speed_gbit_s": 100, "rtt_ms": 1}))
    assert tcp.sites is not None and tcp.sites.interconnect.window_bytes == 6291456  # Linux tcp_rmem max
    rdma = load_cluster(_file(tmp_path, TWO, "r.yaml", interconnect={"links": 1, "speed_gbit_s": 100, "rtt_ms": 1,
                                                                     "transport": "rdma"}))
    assert rdma.sites is not None and rdma.sites.interconnect.window_bytes is None
    assert rdma.sites.interconnect.segment_bytes == 4096


def test_a_cluster_without_sites_has_none() -> None:
    assert load_cluster(EX / "ref-64gpu.yaml").sites is None


IC = {"links": 2, "speed_gbit_s": 400, "rtt_ms": 10}


@pytest.mark.parametrize(("changes", "needles"), [
    ({"sites": [{"name": "a", "nodes": 4}, {"name": "b", "nodes": 3}]},
     ["c.yaml: sites: nodes 4 + 3 = 7 != nodes (8): every node is in one site"]),
    ({"sites": [{"name": "a", "nodes": 4}, {"name": "a", "nodes": 4}]},
     ["sites: name 'a' given more than once"]),
    ({"sites": [{"name": "a", "nodes": 8}]}, ["sites (1): must name at least 2 sites"]),
    ({"sites": [{"name": "a", "nodes": 0}, {"name": "b", "nodes": 8}]},
     ["sites.0.nodes (0): Input should be greater than or equal to 1"]),
    ({"interconnect": None}, ["sites (2): given without interconnect"]),
    ({"sites": None}, ["interconnect: given without sites"]),
    ({"interconnect": {**IC, "rtt_ms": -1}}, ["interconnect.rtt_ms (-1): Input should be greater than or equal to 0"]),
    ({"interconnect": {**IC, "rtt_ms": 5000}},
     ["interconnect.rtt_ms (5000): must be between 0 and 2,000 ms", "geostationary"]),
    ({"interconnect": {**IC, "loss": 1.0}}, ["interconnect.loss (1.0): must be in [0, 1)"]),
    ({"interconnect": {**IC, "loss": -0.1}}, ["interconnect.loss (-0.1): Input should be greater than or equal to 0"]),
    ({"interconnect": {**IC, "speed_gbit_s": 0}}, ["interconnect.speed_gbit_s (0): Input should be greater than 0"]),
    ({"interconnect": {**IC, "links": 0}}, ["interconnect.links (0): Input should be greater than or equal to 1"]),
    ({"interconnect": {**IC, "window_mib": 4096}}, ["interconnect.window_mib (4096): must be between", "RFC 7323"]),
    ({"interconnect": {**IC, "transport": "udp"}}, ["interconnect.transport ('udp')"]),
    ({"interconnect": {**IC, "streams_per_connection": 65}},
     ["interconnect.streams_per_connection (65): Input should be less than or equal to 64"]),
    ({"interconnect": {**IC, "rtt": 10}}, ["interconnect.rtt: unknown key"]),
])
def test_bad_sites_exit_2(tmp_path: Path, changes: dict[str, Any], needles: list[str],
                          cli_fails: Callable[..., str]) -> None:
    cli_fails(["plan", _file(tmp_path, TWO, "c.yaml", **changes), str(LLAMA)], *needles)


@pytest.mark.parametrize(("sync", "needles"), [
    ({"method": "diloco"}, ["w.yaml: sync: sync.inner_steps: required for method diloco"]),
    ({"method": "ddp", "inner_steps": 10}, ["sync.inner_steps: only for diloco and streaming-diloco, not method ddp"]),
    ({"method": "hierarchical", "outer_dtype": "int8"}, ["sync.outer_dtype: only for diloco"]),
    ({"method": "diloco", "inner_steps": 100, "fragments": 4},
     ["sync.fragments (4): only for streaming-diloco, not method diloco"]),
    ({"method": "streaming-diloco", "inner_steps": 10, "fragments": 20},
     ["sync.fragments (20) must be <= inner_steps (10)"]),
    ({"method": "streaming-diloco", "inner_steps": 10, "overlap_steps": 10},
     ["sync.overlap_steps (10) must be < inner_steps (10)"]),
    ({"method": "diloco", "inner_steps": 0}, ["sync.inner_steps (0): Input should be greater than or equal to 1"]),
    ({"method": "diloco", "inner_steps": 100, "outer_dtype": "int4"}, ["sync.outer_dtype ('int4')"]),
    ({"method": "local-sgd"}, ["sync.method ('local-sgd')"]),
])
def test_bad_sync_exit_2(tmp_path: Path, sync: dict[str, Any], needles: list[str],
                         cli_fails: Callable[..., str]) -> None:
    cli_fails(["plan", str(TWO), _file(tmp_path, LLAMA, "w.yaml", sync=sync)], *needles)


def test_sites_scale_in_their_shares() -> None:
    c = load_cluster(TWO)
    assert c.sites is not None
    assert [s.nodes for s in c.sites.sites] == [4, 4]
    grown = c.sites.on_nodes(6)
    assert grown is not None and [s.nodes for s in grown.sites] == [3, 3]
    odd = c.sites.on_nodes(5)
    assert odd is not None and [s.nodes for s in odd.sites] == [3, 2]  # the remainder to the first site
    assert c.sites.on_nodes(1) is None  # one node cannot be split: one site
    assert c.sites.on_nodes(8) is c.sites
