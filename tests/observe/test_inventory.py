"""inventory: sysfs readers on a fake tree, mismatches across nodes (an injected version mismatch), the CLI on
this machine and on node files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slowlink.cli.main import app
from slowlink.errors import SpecError
from slowlink.observe.inventory import Nic, NodeRecord, SysfsIbPort, ib_ports, load_node, mismatches, nics, os_release

runner = CliRunner()


def _write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text + "\n")


def test_nics_from_sysfs(tmp_path: Path) -> None:
    net = tmp_path / "net"
    for rel, text in (("lo/operstate", "unknown"), ("eth0/operstate", "up"), ("eth0/speed", "100000"),
                      ("eth0/mtu", "9000"), ("eth0/device/numa_node", "1"), ("veth1/operstate", "up"),
                      ("veth1/speed", "-1"), ("veth1/mtu", "1500")):
        _write(net, rel, text)
    (net / "eth0" / "device" / "drv").mkdir()
    (net / "eth0" / "device" / "driver").symlink_to(net / "eth0" / "device" / "drv")
    got = nics(net)
    assert [n.name for n in got] == ["eth0", "veth1"]  # loopback left out
    assert got[0] == Nic(name="eth0", state="up", speed_mbit_s=100000, mtu=9000, driver="drv", numa_node=1)
    assert got[1].speed_mbit_s is None and got[1].numa_node is None  # a virtual device
    assert nics(tmp_path / "absent") == []


def test_ib_ports_from_sysfs(tmp_path: Path) -> None:
    ib = tmp_path / "infiniband"
    _write(ib, "mlx5_0/fw_ver", "28.39.1002")
    _write(ib, "mlx5_0/ports/1/state", "4: ACTIVE")
    _write(ib, "mlx5_0/ports/1/rate", "400 Gb/sec (4X NDR)")
    assert ib_ports(ib) == [SysfsIbPort(name="mlx5_0:1", state="ACTIVE", rate_gbit_s=400.0, firmware="28.39.1002")]


def test_os_release(tmp_path: Path) -> None:
    _write(tmp_path, "os-release", 'NAME="Debian"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"')
    assert os_release(tmp_path) == "Debian GNU/Linux 12 (bookworm)"
    assert os_release(tmp_path / "none") is None


def _node(host: str, **kw: object) -> dict[str, object]:
    return {"host": host, "kernel": "6.1.0", "torch": "2.13.0", "nccl": "2.21.5", "gpu_driver": ["535.129.03"],
            "nic_speeds_mbit_s": ["ib0:400000"], **kw}


def _rec(host: str, **kw: object) -> NodeRecord:
    return NodeRecord.from_json(_node(host, **kw), host)


def test_injected_version_mismatch_is_named() -> None:
    recs = [_rec("a"), _rec("b"), _rec("c", nccl="2.18.1", nic_speeds_mbit_s=["ib0:200000"])]
    diff = mismatches(recs)
    assert set(diff) == {"nccl", "nic_speeds_mbit_s"}
    assert diff["nccl"] == {"a": "2.21.5", "b": "2.21.5", "c": "2.18.1"}
    assert diff["nic_speeds_mbit_s"]["c"] == ("ib0:200000",)
    assert mismatches([_rec("a"), _rec("b")]) == {}


def test_cli_across_node_files(tmp_path: Path) -> None:
    paths = []
    for rec in (_node("a"), _node("b", torch="2.12.0")):
        p = tmp_path / f"{rec['host']}.json"
        p.write_text(json.dumps(rec))
        paths += ["--nodes", str(p)]
    res = runner.invoke(app, ["inventory", *paths])
    assert res.exit_code == 1, res.output
    assert "torch (differs)" in res.output and "1 key(s) differ across 2 nodes: torch" in res.output
    res = runner.invoke(app, ["inventory", *paths, "--json"])
    assert json.loads(res.stdout)["mismatches"]["torch"] == {"a": "2.13.0", "b": "2.12.0"}


def test_bad_node_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(SpecError, match=r"host \('list'\) must be a string"):
        load_node(bad)
    typed = tmp_path / "typed.json"
    typed.write_text(json.dumps(_node("a", gpus="eight")))
    res = runner.invoke(app, ["inventory", "--nodes", str(typed)])
    assert res.exit_code == 2 and "gpus ('eight')" in res.output and "Traceback" not in res.output
    garbled = tmp_path / "garbled.json"
    garbled.write_text("{host")
    res = runner.invoke(app, ["inventory", "--nodes", str(garbled)])
    assert res.exit_code == 2 and "not JSON" in res.output and "Traceback" not in res.output
    res = runner.invoke(app, ["inventory", "--nodes", str(tmp_path / "none.json")])
    assert res.exit_code == 2 and "does not exist" in res.output


@pytest.mark.torch
def test_inventory_on_this_machine() -> None:
    pytest.importorskip("torch")
    res = runner.invoke(app, ["inventory", "--json"])
    assert res.exit_code == 0, res.output
    rec = json.loads(res.stdout)
    assert rec["python"] and rec["kernel"] and rec["torch"] and rec["gloo"] is True
    assert isinstance(rec["nics"], list) and isinstance(rec["gpus"], int)


def test_tbf_rate_parsed_from_tc() -> None:
    from slowlink.observe.inventory import tbf_rate_mbit_s

    assert tbf_rate_mbit_s("qdisc tbf 8001: root refcnt 2 rate 50Mbit burst 64Kb lat 50ms") == 50.0
    assert tbf_rate_mbit_s("qdisc tbf 8001: root refcnt 2 rate 1Gbit burst 64Kb lat 50ms") == 1000.0
    assert tbf_rate_mbit_s("qdisc noqueue 0: root refcnt 2") is None


@pytest.mark.torch
@pytest.mark.slow
def test_inventory_gathered_over_a_gloo_job() -> None:
    """--gather: every rank's record all-gathered (here 2 local ranks; under torchrun, the job's ranks)."""
    pytest.importorskip("torch")
    res = runner.invoke(app, ["inventory", "--gather", "--nproc", "2", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert len(d["nodes"]) == 2 and d["mismatches"] == {}
    assert d["nodes"][0]["host"].endswith(":r0") and d["nodes"][1]["host"].endswith(":r1")
