"""Physical bounds and hostile values (issue 39): every rate, size and count outside its bound is refused with
the field, the value and the bound's reason; exit 2, no traceback. Values the YAML 1.1 loader used to read as
strings (1e12) are numbers; empty files, bare lists and NaN overrides are said in words, not Python reprs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from slowlink.spec import bounds
from slowlink.spec.bounds import Bound

EX = Path(__file__).resolve().parents[2] / "examples"
REF, W = str(EX / "ref-64gpu.yaml"), str(EX / "llama3-8b.yaml")
ALL = [b for b in vars(bounds).values() if isinstance(b, Bound)]


def test_every_bound_says_why_and_holds_its_ends() -> None:
    assert len(ALL) >= 12
    for b in ALL:
        assert b.why and b.lo < b.hi
        assert b.check(b.lo) == b.lo and b.check(b.hi) == b.hi
        for bad in (b.hi * 10 + 1, float("nan"), float("inf")):
            with pytest.raises(ValueError, match="must be between"):
                b.check(bad)


@pytest.mark.parametrize(("override", "needle"), [
    ("cluster.nics.compute.speed_gbit_s=1e-300", "nics.compute.speed_gbit_s (1e-300): must be between 0.001 and "
                                                  "100,000 Gbit/s"),
    ("cluster.nics.compute.speed_gbit_s=1e9", "the fastest NIC port today is 800 Gbit/s"),
    ("cluster.nodes=10000000", "nodes (10000000): must be between 1 and 1,000,000"),
    ("cluster.gpus_per_node=100000", "gpus_per_node (100000): must be between 1 and 1,024"),
    ("cluster.fabric.switch_radix=100000", "fabric.switch_radix (100000): must be between 4 and 2,048 ports"),
    ("cluster.fabric.switch_latency_us=1e9", "fabric.switch_latency_us (1e+09): must be between 0 and 10,000 us"),
    ("cluster.scale_up.bandwidth_gbyte_s=1e12", "scale_up.bandwidth_gbyte_s (1e+12): must be between"),
    ("cluster.storage.read_gbyte_s=1e9", "storage.read_gbyte_s (1e+09): must be between 0.001 and 1,000,000 GB/s"),
    ("cluster.storage.metadata_ops_s=1e30", "storage.metadata_ops_s (1e+30): must be between 1 and"),
    ("workload.training.tokens=1e40", "training.tokens (1e+40): must be between 1 and 1e+16 tokens"),
    ('cluster.fabric.oversubscription="1:0"', "has no uplink (0): the uplink side must be > 0"),
    ('cluster.fabric.oversubscription="inf"', "must be a finite number >= 1"),
    ("cluster.nodes=.nan", "--set cluster.nodes (nan): must be a finite number"),
])
def test_out_of_bound_values_are_refused(cli_fails: Callable[..., str], override: str, needle: str) -> None:
    out = cli_fails(["plan", REF, W, "--set", override], needle)
    assert "(top level)" not in out and "None" not in out


@pytest.mark.parametrize(("args", "needle"), [
    (["goodput", REF, W, "--tokens", "-5"], "--tokens ('-5') must be > 0"),
    (["goodput", REF, W, "--tokens", "1e40"], "must be between 1 and 1e+16 tokens"),
    (["cost", REF, W, "--steps", "100000000000"], "--steps (1e+11) must be between 1 and 1e+10 steps"),
    (["collective", REF, "--op", "all_reduce", "--size", "1e30B"], "--size (1e+30) must be between 1 and 1e+12 B"),
])
def test_command_line_counts_and_sizes_are_bounded(cli_fails: Callable[..., str], args: list[str],
                                                   needle: str) -> None:
    cli_fails(args, needle)


@pytest.mark.parametrize(("cluster", "overrides", "needle"), [
    (REF, ["cluster.fabric.oversubscription=[1,2]"], "the second ratio (2) changes nothing: give [1, 1]"),
    (REF, ["cluster.fabric.topology=single-switch", "cluster.fabric.oversubscription=2"],
     "a single switch has no uplinks"),
    (str(EX / "fat3-llama3-style.yaml"), ["cluster.fabric.oversubscription=[1,2,7]"],
     "2 and 7 would collapse into the larger: give it once, e.g. [1, 1, 7]"),
])
def test_a_ratio_needs_a_stage_to_apply_to(cli_fails: Callable[..., str], cluster: str, overrides: list[str],
                                          needle: str) -> None:
    """A ratio the fabric has no uplink stage for used to change nothing, silently (issue 39)."""
    cli_fails(["plan", cluster, W, *[a for o in overrides for a in ("--set", o)]], needle)


def test_yaml_1_2_exponents_are_numbers(tmp_path: Path) -> None:
    from slowlink.fileio import parse_text

    assert parse_text("a: 1e12\nb: 2.5e-3\nc: -4E2\nd: 1.0e+3\ne: 1e\nf: e5", "t", False) == {
        "a": 1e12, "b": 2.5e-3, "c": -400.0, "d": 1000.0, "e": "1e", "f": "e5"}


@pytest.mark.parametrize(("text", "needle"), [
    ("", "the file is empty: write the cluster's keys"),
    ("[1, 2]\n", "the top level must be a mapping of keys (key: value), not a list"),
    ("just a string\n", "not a string"),
])
def test_files_that_are_not_mappings_are_said_in_words(tmp_path: Path, cli_fails: Callable[..., str], text: str,
                                                       needle: str) -> None:
    bad = tmp_path / "c.yaml"
    bad.write_text(text)
    out = cli_fails(["plan", str(bad), W], needle)
    assert "NoneType" not in out
