"""--csv cells as data (report.tabular): each display shape the tables use becomes numbers with units in the
label, and a series of mixed shapes stays text."""

from __future__ import annotations

from slowlink.report.tabular import data_rows, series


def test_display_shapes_become_numbers() -> None:
    assert series("tokens/s", ["1,683,202", "-", "547"]) == [("tokens/s", ["1683202", "", "547"])]
    assert series("MFU", ["40.0%", "50.1%"]) == [("MFU (fraction)", ["0.4", "0.501"])]
    assert series("tp exposed / total (s)", ["2.218 / 2.273", "-"]) == [
        ("tp exposed (s)", ["2.218", ""]), ("tp total (s)", ["2.273", ""])]
    assert series("read demand (GB/s, 1 GB/s/GPU rule)", ["0.00673 (2048)"]) == [
        ("read demand (GB/s)", ["0.00673"]), ("1 GB/s/GPU rule (GB/s)", ["2048"])]
    assert series("arch", ["hopper", "-", "1"]) == [("arch", ["hopper", "", "1"])]  # mixed: text as written
    assert series("x", ["-", "-"]) == [("x", ["", ""])]


def test_a_table_of_metrics_is_tidy() -> None:
    rows = data_rows(["", "a", "b"], [["step (s)", "MFU"], ["1.5", "1,000"], ["2", "-"]], "cluster")
    assert rows == [["cluster", "metric", "value"], ["a", "step (s)", "1.5"], ["b", "step (s)", "2"],
                    ["a", "MFU", "1000"], ["b", "MFU", ""]]
    assert data_rows(["n", "eff"], [["1", "2"], ["100%", "95.5%"]]) == [["n", "eff (fraction)"], ["1", "1"],
                                                                         ["2", "0.955"]]
