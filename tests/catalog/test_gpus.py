"""The bundled GPUs: every link they name is in the catalog, and the H800 is the H100 with a narrower NVLink."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from slowlink.catalog import load_catalog
from slowlink.cli.main import app
from slowlink.spec.cluster import load_cluster
from slowlink.spec.workload import load_workload
from slowlink.workload.step import plan


def test_every_bundled_gpu_names_catalog_links() -> None:
    cat = load_catalog()
    for gpu in cat.gpus.values():
        for name in (gpu.scale_up, gpu.host_link):
            assert name is not None and name in cat.scale_up, (gpu.name, name)


def test_the_h800_computes_as_the_h100_over_less_than_half_its_nvlink() -> None:
    cat = load_catalog()
    h100, h800 = cat.gpu("h100-sxm"), cat.gpu("h800-sxm")
    assert (h800.peak_flops, h800.hbm_bytes, h800.arch) == (h100.peak_flops, h100.hbm_bytes, h100.arch)
    assert cat.link(h800.scale_up).bw_bytes_s / cat.link(h100.scale_up).bw_bytes_s == 200 / 450


def test_init_on_h800_writes_its_link_and_tp_costs_more_than_on_h100(tmp_path: Path) -> None:
    steps = {}
    for gpu in ("h100-sxm", "h800-sxm"):
        res = CliRunner().invoke(app, ["init", str(tmp_path / gpu), "--gpu", gpu, "--nodes", "2", "--tp", "8",
                                       "--pp", "1"])
        assert res.exit_code == 0, res.output
        c = load_cluster(tmp_path / gpu / "cluster.yaml")
        assert c.scale_up.link.name == {"h100-sxm": "nvlink4", "h800-sxm": "nvlink4-h800"}[gpu]
        steps[gpu] = plan(load_workload(tmp_path / gpu / "workload.yaml"), c)
    assert steps["h800-sxm"].compute_s == steps["h100-sxm"].compute_s
    assert steps["h800-sxm"].step_time_s > steps["h100-sxm"].step_time_s
