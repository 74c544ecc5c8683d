"""Backend choice, rendezvous errors and Ctrl-C, without a GPU."""

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from slowlink.bench import launch
from slowlink.errors import BenchError

torch = pytest.importorskip("torch")


def test_nccl_without_gpu_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(BenchError, match=r"--backend \(nccl\) needs a CUDA GPU"):
        launch.resolve_backend("nccl")
    assert launch.resolve_backend("auto") == "gloo"


def test_auto_picks_nccl_when_a_gpu_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert launch.resolve_backend("auto") == "nccl"


def test_unreachable_rendezvous_names_address_and_timeout() -> None:
    port = launch.free_port()  # nobody listens there
    with pytest.raises(BenchError, match=rf"tcp://127.0.0.1:{port} .*within --timeout \(2 s\)"):
        launch.init_rank("gloo", 2.0, rank=1, world=2, addr="127.0.0.1", port=port)


def _marked_pids(mark: str) -> list[int]:
    pids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if mark.encode() in (p / "environ").read_bytes():
                    pids.append(int(p.name))
            except OSError:
                continue
    return pids


@pytest.mark.slow
def test_ctrl_c_leaves_no_stray_ranks(tmp_path: Path) -> None:
    mark = f"SLOWLINK_TEST_MARK={uuid.uuid4().hex}"
    env = {**os.environ, mark.split("=")[0]: mark.split("=")[1], "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    proc = subprocess.Popen([sys.executable, "-c", "from slowlink.cli.main import app; app()", "bench", "collectives",
                             "--nproc", "2", "-b", "64MiB", "-e", "64MiB", "-n", "1000", "--no-results"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while len(_marked_pids(mark)) < 3 and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err.decode()
    assert b"interrupted" in err
    time.sleep(1)
    assert _marked_pids(mark) == []
