"""report.plan's accuracy sentence and JSON: what a user reads about the model's measured error."""

from __future__ import annotations

import pytest

from slowlink.report.plan import accuracy_lines, accuracy_sentence
from slowlink.workload.accuracy import Accuracy, RecordedRun, RunGroup


def _acc(alike: tuple[float, ...], same: tuple[float, ...], gpu: str = "h100-sxm",
         sharded: bool = False) -> Accuracy:
    def group(errs: tuple[float, ...], tp: int) -> RunGroup:
        return RunGroup(tuple(RecordedRun(f"{tp}-{i}", gpu, tp, sharded, e) for i, e in enumerate(errs)))

    return Accuracy(gpu, 8, sharded, group(alike, 8), group(alike + same, 4), ("a100-80gb", "h100-sxm"))


def test_alike_runs_give_mean_range_and_the_gpu_wide_figure() -> None:
    text = accuracy_sentence(_acc((0.10, 0.06), (0.0, 0.02)))
    assert "on 2 held-out h100-sxm runs at TP 8 measured steps were 8.0% longer than predicted" in text
    assert "(|error| 8.0%, +6.0% to +10.0%)" in text
    assert "all 4 held-out h100-sxm runs: 4.5% longer (|error| 4.5%)" in text


def test_a_negative_error_reads_shorter_and_zero3_is_named() -> None:
    text = accuracy_sentence(_acc((-0.04,), (), gpu="a100-80gb", sharded=True))
    assert "at TP 8 with ZeRO-3 measured steps were 4.0% shorter than predicted" in text


def test_no_run_alike_falls_back_to_the_gpu() -> None:
    text = accuracy_sentence(_acc((), (0.05, 0.01)))
    assert text.startswith("accuracy: no held-out h100-sxm run at TP 8;")
    assert "on 2 held-out h100-sxm runs measured steps were 3.0% longer" in text


def test_no_run_on_the_gpu_says_unmeasured() -> None:
    text = accuracy_sentence(_acc((), (), gpu="b200"))
    assert text.startswith("accuracy unmeasured: no held-out published run on b200")
    assert "a100-80gb, h100-sxm" in text


def test_lines_group_clusters_with_the_same_sentence() -> None:
    a, b = _acc((0.1,), ()), _acc((), (), gpu="b200")
    lines = accuracy_lines(["x", "y", "z"], [a, a, b])
    assert len(lines) == 2 and lines[0].startswith("[bold]x, y[/]:") and lines[1].startswith("[bold]z[/]:")


def test_json_lists_the_runs_and_the_errors() -> None:
    js = _acc((0.10, 0.06), (0.0,)).to_json()
    alike, same = js["alike"], js["same_gpu"]
    assert isinstance(alike, dict) and isinstance(same, dict)
    assert alike["runs"] == ["8-0", "8-1"]
    assert alike["mean_error"] == pytest.approx(0.08) and alike["mean_abs_error"] == pytest.approx(0.08)
    assert (alike["min_error"], alike["max_error"]) == (0.06, 0.10)
    assert same["runs"] == ["4-0", "4-1", "4-2"]
    assert (js["gpu"], js["tp"], js["sharded_params"]) == ("h100-sxm", 8, False)
    assert js["gpus_measured"] == ["a100-80gb", "h100-sxm"]


def test_a_flow_plan_is_told_the_runs_were_priced_analytically() -> None:
    assert accuracy_sentence(_acc((0.1,), ()), "flow").startswith("accuracy (of the analytical model): on 1 ")
    assert _acc((0.1,), ()).to_json()["model"] == "analytical"
