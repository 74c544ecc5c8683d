"""The readers on real-format fixtures (tests/data/observe, formats cited in each reader's docstring) and on
malformed input: every error names the file, the line and its content."""

from __future__ import annotations

from pathlib import Path

import pytest

from slowlink.bench.compare import Tolerance, compare_records
from slowlink.bench.nccl_tests import load_nccl_tests, parse_nccl_tests
from slowlink.bench.record import CollectiveHalf, CollectivesRecord, load_record, nccl_tests_record
from slowlink.collectives.ops import busbw_factor
from slowlink.errors import SpecError
from slowlink.observe.common import sniff
from slowlink.observe.hardware import load_ibstat, load_nvidia_smi, parse_ibstat, parse_nvidia_smi_csv
from slowlink.observe.nccl_log import load_nccl_log, parse_nccl_log, transport_class

DATA = Path(__file__).parents[1] / "data" / "observe"
H100 = DATA / "nccl-tests-2.13-all_reduce-2x8-h100.txt"
SOCKET = DATA / "nccl-tests-2.13-all_reduce-2x8-h100-socket.txt"
LEGACY = DATA / "nccl-tests-legacy-all_reduce-1x8-v100.txt"


def test_nccl_tests_2_13_table_reads_every_row_and_rank() -> None:
    run = load_nccl_tests(H100)
    assert (run.op, run.ranks, run.nodes, run.generation) == ("all_reduce", 16, 2, "2.10+")
    assert len(run.rows) == 11 and run.rows[0].size_bytes == 1024 and run.rows[-1].size_bytes == 2**30
    big = run.rows[-1]
    assert big.time_s == pytest.approx(5719.2e-6)  # the table's (us) column
    assert big.busbw_gbyte_s == pytest.approx(352.02)
    assert big.in_place is not None and big.in_place["busbw_gbyte_s"] == pytest.approx(348.54)
    # busbw = algbw x 2(n-1)/n (nccl-tests PERFORMANCE.md) holds on the parsed numbers, to print rounding
    assert big.busbw_gbyte_s == pytest.approx(big.algbw_gbyte_s * busbw_factor("all_reduce", 16), rel=1e-3)
    assert run.avg_busbw_gbyte_s == pytest.approx(127.3164)
    assert run.hostnames[0] == "gpu-a01" and run.hostnames[-1] == "gpu-a02"


def test_legacy_table_without_root_and_with_an_error_column() -> None:
    run = load_nccl_tests(LEGACY)
    assert (run.ranks, run.nodes, run.generation) == (8, 1, "legacy")
    assert all(r.wrong == -1 and r.root == -1 for r in run.rows)  # an error magnitude is not a count
    assert run.rows[-1].busbw_gbyte_s == pytest.approx(128.23)


def test_interleaved_nccl_log_lines_are_skipped() -> None:
    run = load_nccl_tests(SOCKET)
    assert len(run.rows) == 11 and run.rows[-1].busbw_gbyte_s == pytest.approx(6.0)


def test_imported_table_is_a_record_that_compare_reads_directly() -> None:
    base, new = load_record(H100), load_record(SOCKET)  # nccl-tests text accepted by load_record
    assert isinstance(base, CollectivesRecord) and base.rows[0].size_bytes == 1024
    moves = compare_records(base, new, Tolerance(0.10))
    assert len(moves) == 11 and all(m.status == "regressed" for m in moves)
    assert compare_records(base, load_record(H100), Tolerance(0.10))[0].status == "ok"


def test_op_comes_from_option_binary_or_file_name(tmp_path: Path) -> None:
    text = H100.read_text().replace("all_reduce_perf", "mystery")
    with pytest.raises(SpecError, match=r"op \(None\) is not named"):
        parse_nccl_tests(text, "x.txt")
    assert parse_nccl_tests(text, "x.txt", op="all_gather").op == "all_gather"
    assert parse_nccl_tests(text, "run/alltoall_perf.log").op == "all_to_all"
    with pytest.raises(SpecError, match="hypercube_perf"):
        parse_nccl_tests(text, "hypercube_perf.txt")


@pytest.mark.parametrize(("edit", "needles"), [
    (lambda t: t.replace("    402.4  166.75", "    402.4  16x.75"), [":33:", "column algbw ('16x.75')", "402.4"]),
    (lambda t: t.replace("  1073741824     268435456     float     sum      -1   5719.2  187.74  352.02      0",
                         "  1073741824     268435456     float     sum      -1   5719.2"),
     [":35:", "has 10 columns, the header has 13", "truncated"]),
    (lambda t: "\n".join(ln for ln in t.splitlines() if "size" not in ln), ["no nccl-tests table"]),
    (lambda t: "\n".join(ln for ln in t.splitlines() if not ln.startswith(" ")), ["has no rows"]),
    (lambda t: "\n".join(ln for ln in t.splitlines() if "Rank" not in ln), ["ranks (0) unknown"]),
])
def test_garbled_tables_name_the_line_and_content(edit: object, needles: list[str]) -> None:
    text = edit(H100.read_text())  # type: ignore[operator]
    with pytest.raises(SpecError) as exc:
        parse_nccl_tests(text, "t.txt")
    for n in needles:
        assert n in str(exc.value), str(exc.value)


def test_record_keeps_the_contract_keys() -> None:
    rec = nccl_tests_record(load_nccl_tests(H100), str(H100))
    assert {"size_bytes", "time_s", "algbw_gbyte_s", "busbw_gbyte_s", "wrong"} <= set(rec.to_json()["rows"][0])
    row = rec.rows[0]
    assert isinstance(row.in_place, CollectiveHalf) and row.in_place.wrong == 0 and row.count == 256


def test_nccl_log_with_ib_and_gdrdma() -> None:
    log = load_nccl_log(DATA / "nccl-log-2.18-ib-2x2.log")
    assert (log.nccl_version, log.ranks, log.nodes, log.network) == ("2.18.5+cuda12.2", 4, 2, "IB")
    assert log.transports == {"NET/IB": 7, "P2P": 3} and log.gdrdma == 7
    assert log.channels == 4 and log.algorithms == ("Ring", "Tree")
    assert log.ib_devices == ("mlx5_0:1/IB", "mlx5_1:1/IB")
    assert not log.socket_fallback and not log.warnings


def test_nccl_log_socket_fallback_has_evidence_lines() -> None:
    log = load_nccl_log(DATA / "nccl-log-2.18-socket-fallback-2x2.log")
    assert log.socket_fallback and log.network == "Socket" and log.transports["NET/Socket"] == 5
    assert log.evidence["no_ib"][0][0] == 4 and "libibverbs" in log.evidence["no_ib"][0][1]
    assert log.warnings == ("Call to ibv_get_device_list failed",)
    assert log.to_json()["socket_fallback"] is True


def test_nccl_log_2_21_with_launcher_prefix_and_nvls() -> None:
    log = load_nccl_log(DATA / "nccl-log-2.21-nvls-1x8.log")
    assert (log.nccl_version, log.ranks, log.nodes, log.channels) == ("2.21.5+cuda12.4", 8, 1, 24)
    assert "NVLS" in log.algorithms and log.evidence["algo_forced"]


def test_nccl_log_without_nccl_lines_is_refused() -> None:
    with pytest.raises(SpecError, match="no NCCL log line"):
        parse_nccl_log("hello\nworld\n", "x.log")
    assert transport_class("NET/IB/0/GDRDMA") == "NET/IB" and transport_class("SHM/direct/direct") == "SHM"


def test_ibstat_ports_state_rate_and_firmware() -> None:
    ports = load_ibstat(DATA / "ibstat-4port-one-degraded.txt")
    assert [p.name for p in ports] == ["mlx5_0:1", "mlx5_1:1", "mlx5_2:1", "mlx5_3:1"]
    assert [p.up for p in ports] == [True, True, False, True]
    assert ports[1].rate_gbit_s == 200 and ports[2].firmware == "28.37.1014" and ports[0].ca_type == "MT4129"
    assert load_ibstat(DATA / "ibstat-2port-healthy.txt")[1].link_layer == "Ethernet"


def test_ibstat_malformed() -> None:
    with pytest.raises(SpecError, match=r":2: \('garbage here'\) is not ibstat output"):
        parse_ibstat("CA 'mlx5_0'\ngarbage here\n", "ib.txt")
    with pytest.raises(SpecError, match=r"Rate \(missing\)"):
        parse_ibstat("CA 'mlx5_0'\n\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n", "ib.txt")
    with pytest.raises(SpecError, match="Rate must be a number"):
        parse_ibstat("CA 'm'\n Port 1:\n  State: Active\n  Physical state: LinkUp\n  Rate: fast\n", "ib.txt")


def test_nvidia_smi_csv_slowdowns() -> None:
    gpus = load_nvidia_smi(DATA / "nvidia-smi-query-8xh100-throttled.csv")
    assert len(gpus) == 8 and gpus[3].throttle_reasons == ("hw_thermal_slowdown",)
    assert gpus[5].throttle_reasons == ("sw_power_cap",) and gpus[7].throttle_reasons == ()  # idle is fine
    assert gpus[3].sm_clock_mhz == 1410 and gpus[0].driver_version == "535.129.03"


def test_nvidia_smi_csv_malformed() -> None:
    with pytest.raises(SpecError, match="CSV header with 'index'"):
        parse_nvidia_smi_csv("0, NVIDIA H100, 535.1\n", "g.csv")
    with pytest.raises(SpecError, match=r":2: .* has 2 fields, the header has 3"):
        parse_nvidia_smi_csv("index, name, driver_version\n0, H100\n", "g.csv")
    with pytest.raises(SpecError, match=r"field temperature_c \('hot'\) must be a number"):
        parse_nvidia_smi_csv("index, temperature.gpu\n0, hot\n", "g.csv")


def test_sniff_tells_the_formats_apart() -> None:
    assert [sniff(p.read_text()) for p in (H100, DATA / "nccl-log-2.18-ib-2x2.log",
                                           DATA / "ibstat-2port-healthy.txt",
                                           DATA / "nvidia-smi-query-2xa100-idle.csv")] == \
        ["nccl-tests", "nccl-log", "ibstat", "nvidia-smi"]
    assert sniff("plain text") is None


def test_perfquery_and_ethtool_counters() -> None:
    from slowlink.observe.counters import parse_ethtool_stats, parse_perfquery

    (pq,) = parse_perfquery((DATA / "perfquery-symbol-errors.txt").read_text(), "pq.txt")
    assert pq.device == "Lid 18 port 1" and pq.values["PortXmitData"] == 4194304000
    assert pq.errors() == {"SymbolErrorCounter": 1843, "LinkErrorRecoveryCounter": 3, "LinkDownedCounter": 1,
                           "PortRcvErrors": 27}
    assert pq.link_downs() == {"LinkDownedCounter": 1} and pq.lines["SymbolErrorCounter"] == 4
    eth = parse_ethtool_stats((DATA / "ethtool-S-mlx5-crc.txt").read_text(), "eth0")
    assert eth.errors() == {"rx_crc_errors_phy": 412}  # corrected bits (FEC at work) are not faults
    assert sniff((DATA / "perfquery-symbol-errors.txt").read_text()) == "perfquery"
    with pytest.raises(SpecError, match=r":2: .*counter SymbolErrorCounter \('many'\) must be an integer"):
        parse_perfquery("# Port counters: Lid 1 port 1\nSymbolErrorCounter:....many\n", "pq.txt")
    with pytest.raises(SpecError, match=r":3: .*counter rx_crc_errors_phy \('x'\) must be an integer"):
        parse_ethtool_stats("NIC statistics:\n  rx_packets: 1\n  rx_crc_errors_phy: x\n", "e.txt")
    with pytest.raises(SpecError, match="no 'NIC statistics:' header"):
        parse_ethtool_stats("rx: 1\n", "e.txt")


def test_nvidia_smi_topo_nearest_nic() -> None:
    from slowlink.observe.topo import parse_topo

    text = (DATA / "nvidia-smi-topo-m-4gpu-2nic.txt").read_text()
    gpus = parse_topo(text, "topo.txt")
    assert [(g.gpu, g.nic, g.path, g.numa, g.gdr) for g in gpus] == [
        ("GPU0", "mlx5_0", "PXB", "0", True), ("GPU1", "mlx5_0", "PXB", "0", True),
        ("GPU2", "mlx5_1", "NODE", "1", False), ("GPU3", "mlx5_0", "SYS", "1", False)]
    assert sniff(text) == "nvidia-smi-topo"
    with pytest.raises(SpecError, match="no matrix header"):
        parse_topo("GPU0 X\n", "topo.txt")
    cut = "\n".join("GPU3\tNV18\tNV18" if ln.startswith("GPU3") else ln for ln in text.splitlines())
    with pytest.raises(SpecError, match=r"topo.txt:5: .* has 2 columns, the header has 9: truncated"):
        parse_topo(cut, "topo.txt")
    bad = text.replace("GPU2\tNV18\tNV18\t X \tNV18\tSYS\tNODE", "GPU2\tNV18\tNV18\t X \tNV18\t??\t??")
    with pytest.raises(SpecError, match=r":4: .* names no path type"):
        parse_topo(bad, "topo.txt")


def test_ethtool_info() -> None:
    from slowlink.observe.hardware import parse_ethtool_info

    d = parse_ethtool_info((DATA / "ethtool-i-mlx5-node1.txt").read_text(), "i.txt")
    assert (d.driver, d.version, d.firmware, d.bus_info, d.line, d.version_line) == \
        ("mlx5_core", "23.10-1.1.9", "28.39.1002", "0000:18:00.0", 3, 2)
    with pytest.raises(SpecError, match=r"i.txt:1: \('garbage'\) is not ethtool -i output"):
        parse_ethtool_info("garbage\n", "i.txt")
    with pytest.raises(SpecError, match=r"driver \(missing\)"):
        parse_ethtool_info("version: 1\n", "i.txt")


def test_lspci_links() -> None:
    from slowlink.observe.pcie import parse_lspci

    links = parse_lspci((DATA / "lspci-vv-nic-downgraded.txt").read_text(), "lspci.txt")
    assert [(p.address, p.downgraded) for p in links] == [("18:00.0", False), ("2a:00.0", True), ("9a:00.0", False)]
    assert links[1].fraction == pytest.approx(0.25) and links[1].line == 28
    assert parse_lspci("00:1f.3 Audio device: Intel\n\t\tLnkCap:\tPort #0, Speed 8GT/s, Width x1\n") == ()
    with pytest.raises(SpecError, match="no PCI device line"):
        parse_lspci("LnkSta: Speed 8GT/s, Width x4\n", "x.txt")


def test_ibv_devinfo_ports() -> None:
    from slowlink.observe.hardware import parse_ibv_devinfo

    text = (DATA / "ibv_devinfo-v-2hca-one-slow.txt").read_text()
    ports = parse_ibv_devinfo(text, "ibv.txt")
    assert [(p.name, p.state, p.physical_state, p.rate_gbit_s, p.ca_type) for p in ports] == [
        ("mlx5_0:1", "Active", "LinkUp", 400.0, "MT4129"), ("mlx5_1:1", "Active", "LinkUp", 200.0, "MT4129")]
    assert sniff(text) == "ibv_devinfo"
    plain = "\n".join(ln for ln in text.splitlines() if "active_" not in ln)
    with pytest.raises(SpecError, match=r"mlx5_0 port 1: active_width \(missing\) must be given: run ibv_devinfo -v"):
        parse_ibv_devinfo(plain, "ibv.txt")
    with pytest.raises(SpecError, match="width must be NX"):
        parse_ibv_devinfo(text.replace("4X (2)", "wide"), "ibv.txt")


def test_nvidia_smi_xml() -> None:
    from slowlink.observe.nvsmi_xml import parse_nvidia_smi_xml

    text = (DATA / "nvidia-smi-q-x-2xh100-remap.xml").read_text()
    a, b = parse_nvidia_smi_xml(text, "q.xml")
    assert (a.index, a.driver_version, a.temperature_c, a.sm_clock_mhz, a.power_w) == (0, "550.90.07", 41, 1980, 412.31)
    assert a.throttle_reasons == () and not a.remap_pending and a.ecc_uncorrectable == 0
    assert b.throttle_reasons == ("hw_slowdown", "hw_power_brake_slowdown") and b.throttle_mask == 0x88
    assert b.remap_pending and b.ecc_uncorrectable == 1 and b.bus_id == "00000000:2A:00.0"
    assert sniff(text) == "nvidia-smi-xml"
    with pytest.raises(SpecError, match=r"q.xml:3: \(column \d+\) is not well-formed XML"):
        parse_nvidia_smi_xml("<nvidia_smi_log>\n<gpu>\n</nvidia_smi_log>\n", "q.xml")
    with pytest.raises(SpecError, match="root element"):
        parse_nvidia_smi_xml("<log/>", "q.xml")
    with pytest.raises(SpecError, match="no <gpu> element"):
        parse_nvidia_smi_xml("<nvidia_smi_log></nvidia_smi_log>", "q.xml")
