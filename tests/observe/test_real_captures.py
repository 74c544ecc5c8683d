"""Every reader on real, published captures (tests/data/observe/real/SOURCES.md names each source): the values
asserted are read off the capture by eye, and each test names what a hand-written fixture did not have."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from slowlink.bench.compare import Tolerance, compare_records
from slowlink.bench.nccl_tests import load_nccl_tests
from slowlink.bench.record import nccl_tests_record
from slowlink.cli.main import app
from slowlink.observe.checks import check_links, check_transport
from slowlink.observe.common import sniff
from slowlink.observe.counters import parse_perfquery
from slowlink.observe.doctor import diagnose, read_inputs
from slowlink.observe.hardware import load_ibstat, load_nvidia_smi, parse_ibv_devinfo
from slowlink.observe.nccl_log import load_nccl_log
from slowlink.observe.topo import parse_topo, topo_columns

REAL = Path(__file__).parents[1] / "data" / "observe" / "real"
EFA_T4 = REAL / "all_reduce_perf-2.12-efa-2x1-t4-mpirun.txt"
P4D_FEB = REAL / "all_reduce_perf-legacy-2.8.3-efa-2x8-a100-mpirun.txt"
P4D_JUN = REAL / "all_reduce_perf-legacy-2.9.9-efa-2x8-a100-mpirun.txt"
SOCK_3N = REAL / "all_reduce_perf-legacy-socket-3x1-t4.txt"
SOCK_A1, SOCK_A2, SOCK_B1 = (REAL / f"all_reduce_perf-2.18-socket-config{c}.txt" for c in ("A-rep1", "A-rep2",
                                                                                              "B-rep1"))
DDP0, DDP1 = REAL / "nccl-log-2.7.8-socket-ddp-node0.txt", REAL / "nccl-log-2.7.8-socket-ddp-node1.txt"
ROCE = REAL / "nccl-log-2.27.5-roce-2x8-sglang.txt"
ONE_NODE = REAL / "nccl-log-2.20.5-1node-2gpu-nccl-tests.txt"
runner = CliRunner()


def _row(run: object, size: int) -> object:
    return next(r for r in run.rows if r.size_bytes == size)  # type: ignore[attr-defined]


def test_every_capture_is_sniffed_as_its_format() -> None:
    kinds = {p.name: sniff(p.read_text()) for p in sorted(REAL.iterdir()) if p.suffix != ".md"}
    assert {k for n, k in kinds.items() if n.startswith("all_reduce_perf")} == {"nccl-tests"}
    assert {k for n, k in kinds.items() if n.startswith("nccl-log-2.20.5")} == {"nccl-tests"}  # it holds a table
    assert {kinds[n] for n in kinds if n.startswith("nccl-log-2.2") and "1node" not in n} == {"nccl-log"}
    assert kinds["nccl-log-2.7.8-socket-ddp-node0.txt"] == "nccl-log"
    assert kinds["ibstat-cx4-initializing.txt"] == kinds["ibstat-mlx4-2port-fdr.txt"] == "ibstat"
    assert kinds["ibv_devinfo-v-mlx4-port2-polling.txt"] == "ibv_devinfo"
    assert kinds["perfquery-x-2port.txt"] == kinds["perfquery-x-linkdowned.txt"] == "perfquery"
    assert kinds["nvidia-smi-topo-m-dgx-a100.txt"] == kinds["nvidia-smi-topo-m-h100-vm-ansi.txt"] == "nvidia-smi-topo"
    assert kinds["nvidia-smi-query-gpu-h100-vm-load.csv"] == "nvidia-smi"


def test_nccl_tests_mpirun_tagged_with_size_zero_rows() -> None:
    """Every line is `[1,0]<stdout>:`-tagged, NCCL INFO lines sit inside the table, -b 1 prints two size-0 rows."""
    run = load_nccl_tests(EFA_T4)
    assert (run.op, run.ranks, run.nodes, run.generation) == ("all_reduce", 2, 2, "2.10+")
    assert run.hostnames == ("test-nccl-efa-worker-0", "test-nccl-efa-worker-1")
    assert len(run.rows) == 29 and run.rows[0].size_bytes == 4  # 31 printed, the two size-0 rows skipped
    big = _row(run, 1073741824)
    assert big.time_s == pytest.approx(344981e-6) and big.busbw_gbyte_s == 3.11 and big.wrong == 0
    assert big.in_place == {"time_s": pytest.approx(344454e-6), "algbw_gbyte_s": 3.12, "busbw_gbyte_s": 3.12,
                            "wrong": 0}
    assert run.avg_busbw_gbyte_s == pytest.approx(1.15327)
    log = load_nccl_log(EFA_T4)  # the NCCL_DEBUG=INFO lines of the same file
    assert (log.nccl_version, log.network, log.nodes) == ("2.12.7+cuda11.4", "AWS Libfabric", 2)
    assert log.transports == {"NET/AWS Libfabric": 8} and not log.socket_fallback


def test_nccl_tests_legacy_16_ranks_over_efa() -> None:
    run = load_nccl_tests(P4D_FEB)
    assert (run.ranks, run.nodes, run.generation, len(run.rows)) == (16, 2, "legacy", 28)
    assert run.devices[0] == "A100-SXM4-40GB" and run.hostnames[15] == "nccl-tests-efa-worker-1"
    big = _row(run, 1073741824)
    assert (big.busbw_gbyte_s, big.algbw_gbyte_s, big.wrong) == (32.71, 17.44, -1)  # error 5e-07: not a count
    assert big.in_place is not None and big.in_place["busbw_gbyte_s"] == 32.84
    log = load_nccl_log(P4D_FEB)
    assert (log.nccl_version, log.ranks, log.gdrdma, log.channels) == ("2.8.3+cuda11.2", 16, 64, 8)
    assert log.transports == {"P2P": 256, "NET/AWS Libfabric": 64} and log.algorithms == ("Ring", "Tree")
    june = load_nccl_tests(P4D_JUN)
    assert len(june.rows) == 30 and _row(june, 4294967296).busbw_gbyte_s == 43.81


def test_nccl_tests_legacy_na_error_column_over_sockets() -> None:
    """-c 0 prints N/A in the legacy `error` column (the reader refused it before)."""
    run = load_nccl_tests(SOCK_3N)
    assert (run.op, run.ranks, run.nodes, len(run.rows)) == ("all_reduce", 3, 3, 11)
    first = run.rows[0]
    assert (first.size_bytes, first.time_s, first.busbw_gbyte_s, first.wrong) == (104857600, 0.202872, 0.69, -1)
    assert run.params["nThread"] == "1" and run.avg_busbw_gbyte_s == pytest.approx(0.58536)


def test_nccl_tests_2_18_mpi_binary_names_the_op() -> None:
    """The op comes from `# Collective test starting: all_reduce_perf_mpi` (a NAME_SUFFIX=_mpi build)."""
    text = SOCK_A1.read_text()
    from slowlink.bench.nccl_tests import parse_nccl_tests

    run = parse_nccl_tests(text, "capture.txt")  # a file name that names no op
    assert (run.op, run.ranks, run.nodes, len(run.rows)) == ("all_reduce", 2, 1, 8)
    assert _row(run, 33554432).busbw_gbyte_s == 2.24 and run.avg_busbw_gbyte_s == pytest.approx(1.57614)


def _compare(base: Path, new: Path) -> dict[int, str]:
    moves = compare_records(nccl_tests_record(load_nccl_tests(base), str(base)),
                            nccl_tests_record(load_nccl_tests(new), str(new)), Tolerance(0.10))
    return {int(m.key.split()[3]): m.status for m in moves}


def test_real_runs_compared_against_a_baseline() -> None:
    """Two runs of one configuration agree; a changed configuration regresses where the capture shows it; the
    same 2 x p4d job four months later (NCCL 2.8.3 -> 2.9.9) is faster from 256 MiB up."""
    assert set(_compare(SOCK_A1, SOCK_A2).values()) == {"ok"}
    worse = _compare(SOCK_A1, SOCK_B1)
    assert sorted(s for s, v in worse.items() if v == "regressed") == [4194304, 33554432, 67108864]
    later = _compare(P4D_FEB, P4D_JUN)
    assert sorted(s for s, v in later.items() if v == "improved" and s >= 2**28) == [2**28, 2**29, 2**30]
    assert "regressed" not in later.values()
    earlier = _compare(P4D_JUN, P4D_FEB)
    assert sorted(s for s, v in earlier.items() if v == "regressed" and s >= 2**28) == [2**28, 2**29, 2**30]


def test_compare_cli_exits_1_on_the_real_regression(tmp_path: Path) -> None:
    res = runner.invoke(app, ["baseline", "save", "p4d", str(P4D_JUN), "--dir", str(tmp_path)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["compare", "p4d", str(P4D_FEB), "--dir", str(tmp_path), "--json"])
    assert res.exit_code == 1, res.output
    res = runner.invoke(app, ["compare", "p4d", str(P4D_JUN), "--dir", str(tmp_path)])
    assert res.exit_code == 0, res.output


def test_nccl_log_2_7_socket_fallback_per_node() -> None:
    """A per-node console shows one host and no nNodes line: the `via NET/Socket` connections are the evidence;
    the WARN lines carry `misc/ibvwrap.cc:63` between the device and NCCL; NCCL 2.7 names SHM `direct shared
    memory`."""
    log = load_nccl_log(DDP0)
    assert (log.nccl_version, log.ranks, log.nodes, log.network) == ("2.7.8+cuda10.1", 8, 1, "Socket")
    assert log.transports == {"NET/Socket": 8, "P2P": 8, "SHM": 4} and log.socket_fallback
    assert log.warnings == ("Failed to open libibverbs.so[.1]",) * 4
    assert log.evidence["no_ib"][0][0] == 16
    node1 = load_nccl_log(DDP1)
    assert node1.nccl_version is None and node1.hostnames == ("tesla-106",) and node1.socket_fallback


def test_doctor_flags_the_real_socket_fallback() -> None:
    d = diagnose(read_inputs([DDP0, DDP1]))
    err = [f for f in d.findings if f.severity == "error"]
    assert d.exit_code == 3 and len(err) == 2 and {f.layer for f in err} == {"transport"}
    assert "8 connection(s) via NET/Socket" in err[0].what
    assert "NCCL WARN Failed to open libibverbs.so[.1]" in err[0].evidence[0]
    res = runner.invoke(app, ["doctor", str(DDP0)])
    assert res.exit_code == 3 and "TCP sockets" in res.output


def test_nccl_log_2_27_roce_devices_and_no_false_collnet() -> None:
    log = load_nccl_log(ROCE)
    assert (log.nccl_version, log.ranks, log.nodes, log.network) == ("2.27.5+cuda12.9", 16, 2, "IB")
    assert log.ib_devices == tuple(f"mlx5_{i}:1/RoCE" for i in (0, 1, 2, 5, 6, 7, 8, 11))  # no "[RO];", "OOB"
    assert log.transports == {"NET/IB": 64, "P2P": 240} and log.gdrdma == 64 and log.channels == 16
    assert log.algorithms == ("Ring", "Tree")  # "ncclCollNetPlugin_v10 symbol" is no CollNet
    assert [f.severity for f in check_transport(read_inputs([ROCE]))] == ["ok"]


def test_single_node_socket_network_is_no_fallback() -> None:
    """No IB on one node prints `Using network Socket`, but every connection is P2P: nothing to flag."""
    log = load_nccl_log(ONE_NODE)
    assert (log.network, log.nodes, log.transports) == ("Socket", 1, {"P2P": 48}) and not log.socket_fallback
    d = diagnose(read_inputs([ONE_NODE]))
    assert d.exit_code == 0 and not [f for f in d.findings if f.severity != "ok"]


def test_ibstat_real_ports_and_the_subnet_manager_fix() -> None:
    (port,) = load_ibstat(REAL / "ibstat-cx4-initializing.txt")
    assert (port.name, port.state, port.physical_state, port.rate_gbit_s, port.firmware, port.ca_type) == (
        "mlx5_0:1", "Initializing", "LinkUp", 100.0, "12.20.1010", "")
    fdr = load_ibstat(REAL / "ibstat-mlx4-2port-fdr.txt")
    assert [(p.name, p.up, p.rate_gbit_s, p.ca_type) for p in fdr] == [("mlx4_0:1", True, 56.0, "MT4099"),
                                                                       ("mlx4_0:2", True, 56.0, "MT4099")]
    (f,) = [f for f in check_links(read_inputs([REAL / "ibstat-cx4-initializing.txt"])) if f.severity == "error"]
    assert "subnet manager" in f.fix and "cable is not the suspect" in f.fix


def test_ibv_devinfo_verbose_with_flag_lines() -> None:
    path = REAL / "ibv_devinfo-v-mlx4-port2-polling.txt"
    (port,) = parse_ibv_devinfo(path.read_text(), str(path))
    assert (port.name, port.state, port.physical_state, port.rate_gbit_s, port.firmware, port.ca_type) == (
        "mlx4_1:2", "Down", "Polling", 10.0, "2.42.5000", "MT4099")
    (f,) = [f for f in check_links(read_inputs([path])) if f.severity == "error"]
    assert "cable" in f.fix and f.evidence == (f"{path}:122: mlx4_1 port 2: State Down, Physical state Polling",)


def test_perfquery_extended_two_ports_and_a_link_down() -> None:
    two = parse_perfquery((REAL / "perfquery-x-2port.txt").read_text(), "pq")
    assert [c.device for c in two] == ["Lid 1719 port 1", "Lid 1719 port 2"]
    assert two[0].values["PortXmitData"] == 36298026860928 and two[1].values["PortXmitWait"] == 36510964
    assert two[1].lines["PortXmitWait"] == 51 and not any(c.errors() for c in two)
    (down,) = parse_perfquery((REAL / "perfquery-x-linkdowned.txt").read_text(), "pq")
    assert down.errors() == {"LinkDownedCounter": 1, "PortXmitDiscards": 20046} and down.link_downs()
    links = check_links(read_inputs([REAL / "perfquery-x-2port.txt", REAL / "perfquery-x-linkdowned.txt"]))
    assert sorted(f.severity for f in links) == ["error", "ok", "ok"]


def test_topo_dgx_a100_hca_names_and_ansi_header() -> None:
    gpus = parse_topo((REAL / "nvidia-smi-topo-m-dgx-a100.txt").read_text())
    assert [(g.gpu, g.nic, g.path, g.numa) for g in gpus][::2] == [
        ("GPU0", "mlx5_0", "PXB", "3"), ("GPU2", "mlx5_2", "PXB", "1"), ("GPU4", "mlx5_6", "PXB", "7"),
        ("GPU6", "mlx5_8", "PXB", "5")]
    assert len(gpus) == 8 and all(g.gdr for g in gpus)
    text = (REAL / "nvidia-smi-topo-m-h100-vm-ansi.txt").read_text()
    assert "\x1b[4m" in text and topo_columns(text) == (0, ["GPU0", "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"])
    assert parse_topo(text) == ()  # one GPU, no NIC


def test_nvidia_smi_csv_every_field_under_load() -> None:
    (gpu,) = load_nvidia_smi(REAL / "nvidia-smi-query-gpu-h100-vm-load.csv")
    assert (gpu.index, gpu.name, gpu.driver_version, gpu.bus_id) == (0, "NVIDIA H100 80GB HBM3", "590.48.01",
                                                                     "00000000:00:09.0")
    assert (gpu.temperature_c, gpu.sm_clock_mhz, gpu.max_sm_clock_mhz, gpu.power_w) == (59, 1980, 1980, 631.95)
    assert (gpu.throttle_mask, gpu.ecc_uncorrectable, gpu.remap_pending, gpu.remap_failure) == (0, 0, False, False)
