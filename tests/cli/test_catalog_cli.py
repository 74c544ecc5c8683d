"""Issue 19: ``slowlink catalog`` lists what slowlink knows, with each entry's source."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slowlink.catalog.store import catalog_entries, entry_sources, load_catalog
from slowlink.cli.main import app

runner = CliRunner()


def test_every_bundled_entry_is_listed_with_a_source() -> None:
    res = runner.invoke(app, ["catalog", "--json"])
    assert res.exit_code == 0, res.output
    listed = json.loads(res.output)
    assert listed.pop("slowlink")["inputs"] == []  # the version; the bundled catalog is no spec file
    cat = load_catalog()
    assert set(listed["gpus"]) == set(cat.gpus)
    assert set(listed["scale_up"]) == set(cat.scale_up)
    assert set(listed["transports"]) == set(cat.transports)
    assert all(e["source"] for sec in listed.values() for e in sec.values())


def test_one_entry_in_its_file_units() -> None:
    res = runner.invoke(app, ["catalog", "gpu", "h100-sxm", "--json"])
    assert res.exit_code == 0, res.output
    entry = json.loads(res.output)["gpus"]["h100-sxm"]
    assert entry["hbm_gib"] == pytest.approx(load_catalog().gpu("h100-sxm").hbm_bytes / 2**30)
    assert "datasheet" in entry["source"]


def test_a_table_per_section() -> None:
    res = runner.invoke(app, ["catalog", "links"])
    assert res.exit_code == 0
    assert "nvlink4" in res.output and "ib-ndr" not in res.output


def test_a_user_catalog_file_adds_and_replaces(tmp_path: Path) -> None:
    f = tmp_path / "mine.yaml"
    f.write_text("transports:\n  my-nic: {kind: roce, speed_gbit_s: 200, efficiency: 0.9, latency_us: 15, "
                 "rdma: true, lossless: true, tail_penalty: 0.0}\n")
    got = catalog_entries([f])["transports"]
    assert got["my-nic"]["source"] == str(f) and "ib-ndr" in got


def test_entry_sources_reads_the_first_comment_under_each_entry() -> None:
    text = "# header\na:\n  # from A\n  x: 1\n  # not this\nb:\n  y: 2  # inline\n"
    assert entry_sources(text) == {"a": "from A"}


@pytest.mark.parametrize(("args", "needle"), [
    (["catalog", "switches"], "SECTION ('switches') is not a catalog section; known: gpus, scale-up, transports"),
    # Suggestions are the sections' names, never their aliases (gpu, links, nics, ...) nor one twice.
    (["catalog", "bogus"], "SECTION ('bogus') is not a catalog section; did you mean gpus?"),
    (["catalog", "tranport"], "did you mean transports?"),
    (["catalog", "scale"], "did you mean scale-up?"),
    (["catalog", "gpus", "h100"], "NAME ('h100') is not in the catalog's gpus; did you mean"),
    (["catalog", "--catalog", "/nonexistent.yaml"], "does not exist"),
])
def test_bad_input_is_one_message_and_exit_2(args: list[str], needle: str) -> None:
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert needle in res.output and "Traceback" not in res.output


def test_a_malformed_user_catalog_names_the_field(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("gpus:\n  x: {bf16_tflops: -1}\n")
    res = runner.invoke(app, ["catalog", "--catalog", str(f)])
    assert res.exit_code == 2
    assert "gpus.x" in res.output and "Traceback" not in res.output


def test_every_bundled_gpu_names_a_host_link_the_catalog_has() -> None:
    cat = load_catalog()
    for gpu in cat.gpus.values():
        assert gpu.host_link is not None, gpu.name
        assert cat.link(gpu.host_link).bw_bytes_s > 0
