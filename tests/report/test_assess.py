"""Rendering of an assessment: the plan's lines, each said once across clusters."""

from __future__ import annotations

from slowlink.report.assess import grouped_lines


def test_a_line_shared_by_clusters_is_said_once_led_by_all_of_them() -> None:
    lines = grouped_lines([("a", ["cost: 1", "time to train: not priced: no budget"]),
                           ("b", ["cost: 2", "time to train: not priced: no budget"])])
    assert lines == ["[bold]a[/]: cost: 1", "[bold]a, b[/]: time to train: not priced: no budget",
                     "[bold]b[/]: cost: 2"]
    assert grouped_lines([]) == []
