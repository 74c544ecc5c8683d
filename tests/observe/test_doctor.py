"""doctor on files: bottom-up order, severities, evidence lines, exit codes, the model and baseline checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from slowlink.errors import SpecError
from slowlink.observe.checks import LAYERS
from slowlink.observe.doctor import diagnose, model_predictor, read_inputs

DATA = Path(__file__).parents[1] / "data" / "observe"
EX = Path(__file__).parents[2] / "examples"


def _diag(*names: str, **kw: object):  # type: ignore[no-untyped-def]
    return diagnose(read_inputs([DATA / n for n in names]), **kw)  # type: ignore[arg-type]


def test_socket_fallback_is_an_error_with_its_log_lines() -> None:
    d = _diag("nccl-log-2.18-socket-fallback-2x2.log")
    err = [f for f in d.findings if f.severity == "error"]
    assert len(err) == 1 and err[0].layer == "transport" and "TCP sockets between 2 nodes" in err[0].what
    assert any(":4: " in e and "libibverbs" in e for e in err[0].evidence)
    assert any("Using network Socket" in e for e in err[0].evidence)
    assert any("via NET/Socket/0" in e for e in err[0].evidence)
    assert d.exit_code == 3


def test_healthy_ib_log_is_clean() -> None:
    d = _diag("nccl-log-2.18-ib-2x2.log", "ibstat-2port-healthy.txt")
    assert d.worst == "ok" and d.exit_code == 0


def test_nccl_tests_table_with_embedded_log_uses_the_tables_nodes() -> None:
    d = _diag("nccl-tests-2.13-all_reduce-2x8-h100-socket.txt")
    assert any(f.layer == "transport" and f.severity == "error" for f in d.findings)


def test_links_down_and_slow_port_named() -> None:
    d = _diag("ibstat-4port-one-degraded.txt")
    whats = [(f.severity, f.what) for f in d.findings if f.layer == "link"]
    assert ("error", "mlx5_2:1 is not up (Down, Polling)") in whats
    assert ("warning", "mlx5_1:1 trained at 200 Gbit/s, below 400 Gbit/s of its peers") in whats
    fw = next(f for f in d.findings if f.layer == "versions")
    assert "28.37.1014" in fw.what and fw.severity == "warning"  # one HCA a firmware behind


def test_findings_are_ordered_bottom_up() -> None:
    d = _diag(*(p.name for p in sorted(DATA.iterdir()) if p.is_file()))
    order = [LAYERS.index(f.layer) for f in d.findings]
    assert order == sorted(order) and set(order) >= {0, 1, 2, 3}


def test_gpu_slowdowns_graded() -> None:
    d = _diag("nvidia-smi-query-8xh100-throttled.csv")
    sev = {f.what.split(" (")[0]: f.severity for f in d.findings if f.layer == "gpu"}
    assert sev == {"GPU 3": "error", "GPU 5": "warning"}
    assert d.exit_code == 3


def test_busbw_against_the_model() -> None:
    pred = model_predictor(EX / "ref-64gpu.yaml")
    d = _diag("nccl-tests-2.13-all_reduce-2x8-h100-socket.txt", predictor=pred)
    coll = [f for f in d.findings if f.layer == "collective"]
    assert coll[0].severity == "error" and "below the model" in coll[0].what
    assert "busbw 6 GB/s measured" in coll[0].evidence[0] and ":40:" in coll[0].evidence[0]


def test_baseline_regression_from_nccl_tests_files() -> None:
    d = _diag("nccl-tests-2.13-all_reduce-2x8-h100-socket.txt",
              baseline=DATA / "nccl-tests-2.13-all_reduce-2x8-h100.txt")
    f = next(f for f in d.findings if "baseline" in f.what)
    assert f.severity == "warning" and f.what.startswith("11 of 11 rows slower")


def test_unknown_input_and_bad_tolerance(tmp_path: Path) -> None:
    p = tmp_path / "notes.txt"
    p.write_text("nothing to see\n")
    with pytest.raises(SpecError, match="is not nccl-tests output"):
        read_inputs([p])
    with pytest.raises(SpecError, match=r"--tolerance \(150%\)"):
        _diag("ibstat-2port-healthy.txt", tolerance=1.5)


def test_error_counters_graded() -> None:
    d = _diag("perfquery-symbol-errors.txt", "ethtool-S-mlx5-crc.txt")
    link = {f.what: f.severity for f in d.findings if f.layer == "link"}
    assert link["Lid 18 port 1: SymbolErrorCounter, LinkErrorRecoveryCounter, LinkDownedCounter, PortRcvErrors "
                "above 0 (the link went down)"] == "error"
    crc = next(f for f in d.findings if "rx_crc_errors_phy" in f.what)
    assert crc.severity == "warning"
    assert crc.evidence == (f"{DATA / 'ethtool-S-mlx5-crc.txt'}:10: rx_crc_errors_phy 412",)


def test_gpus_far_from_their_nic() -> None:
    d = _diag("nvidia-smi-topo-m-4gpu-2nic.txt")
    (f,) = [f for f in d.findings if f.layer == "affinity"]
    assert f.severity == "warning" and "GPU2: NODE, GPU3: SYS" in f.what and d.exit_code == 1
    assert f.evidence[1].endswith(":5: GPU3 nearest NIC mlx5_0 via SYS (NUMA 1)")


def test_nic_driver_and_firmware_mismatch_across_nodes() -> None:
    d = _diag("ethtool-i-mlx5-node1.txt", "ethtool-i-mlx5-node2.txt")
    whats = {f.what for f in d.findings}
    assert "NIC driver (mlx5_core) differs: 23.07-0.5.1, 23.10-1.1.9" in whats
    assert "NIC firmware (mlx5_core) differs: 28.37.1014, 28.39.1002" in whats
    assert d.exit_code == 1


def test_pcie_link_trained_below_capability() -> None:
    d = _diag("lspci-vv-nic-downgraded.txt")
    (f,) = [f for f in d.findings if f.severity == "error"]
    assert f.layer == "link" and f.what.startswith("PCIe 2a:00.0") and "25% of its bandwidth" in f.what
    assert f.evidence[0].endswith(":28: LnkSta 16GT/s x8 (LnkCap 32GT/s x16)")


def test_ibv_devinfo_port_trained_slow() -> None:
    d = _diag("ibv_devinfo-v-2hca-one-slow.txt")
    (f,) = [f for f in d.findings if f.severity == "warning"]
    assert f.what == "mlx5_1:1 trained at 200 Gbit/s, below 400 Gbit/s of its peers" and ":36:" in f.evidence[0]


def test_gpu_memory_errors_from_xml() -> None:
    d = _diag("nvidia-smi-q-x-2xh100-remap.xml")
    errs = [f for f in d.findings if f.severity == "error"]
    assert [f.what for f in errs] == ["GPU 1 (00000000:2A:00.0) memory: uncorrectable ECC errors, a row remap pending",
                                      "GPU 1 (00000000:2A:00.0) slowed down: hw_slowdown, hw_power_brake_slowdown"]
    assert errs[1].evidence[0].endswith(": GPU 1: throttle mask 0x88, SM 990 of 1980 MHz, 57 C")
