import json

import pytest
from typer.testing import CliRunner

from slowlink.cli.main import app

pytest.importorskip("torch")
runner = CliRunner()


def test_json_rows() -> None:
    res = runner.invoke(app, ["bench", "collectives", "--nproc", "2", "-b", "4KiB", "-e", "8KiB", "-n", "1",
                              "-w", "0", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [r["size_bytes"] for r in rows] == [4096, 8192]
    assert all({"time_s", "algbw_gbyte_s", "busbw_gbyte_s", "wrong"} <= set(r) for r in rows)


@pytest.mark.parametrize(("args", "msg"), [
    (["-o", "scan"], "op ('scan') must be one of"),
    (["-b", "8MiB", "-e", "1MiB"], "need 0 < minbytes <= maxbytes"),
    (["--backend", "nccl"], "backend ('nccl')"),
])
def test_bad_input_exit_2(args: list[str], msg: str) -> None:
    res = runner.invoke(app, ["bench", "collectives", *args])
    assert res.exit_code == 2
    assert msg in res.output and "Traceback" not in res.output
