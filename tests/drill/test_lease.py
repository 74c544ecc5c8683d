"""One writer per checkpoint directory: the lease refuses a second holder, names the first, bumps its epoch for
the next launcher, and fences a writer whose epoch is gone; the lease wrapper exits 75 when refused."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from slowlink.drill.lease import REFUSED_EXIT, LeaseTaken, acquire, holds, read_lease


def test_a_second_holder_is_refused_and_told_who_holds_it(tmp_path: Path) -> None:
    fd, lease = acquire(tmp_path, "run-a")
    try:
        assert lease.epoch == 1 and read_lease(tmp_path) == lease
        with pytest.raises(LeaseTaken, match=r"held by run 'run-a' \(launcher pid \d+, epoch 1\)") as info:
            acquire(tmp_path, "run-b")
        assert info.value.rule == "one_writer"
    finally:
        os.close(fd)
    fd, lease = acquire(tmp_path, "run-b")  # the holder is gone: the next takes it, one epoch on
    os.close(fd)
    assert lease.epoch == 2 and lease.run_id == "run-b"


def test_a_writer_whose_epoch_is_gone_is_fenced(tmp_path: Path) -> None:
    fd, first = acquire(tmp_path, "run-a")
    os.close(fd)  # its launcher died
    fd, _ = acquire(tmp_path, "run-b")
    os.close(fd)
    assert not holds(tmp_path, first.epoch) and holds(tmp_path, first.epoch + 1) and holds(tmp_path, None)


def test_the_wrapper_holds_the_lock_for_its_command_and_refuses_a_second(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    first = subprocess.Popen([sys.executable, "-m", "slowlink.drill.lease", str(tmp_path), "run-a", "--",
                              sys.executable, "-c", "import sys, time; sys.stdout.write('up\\n'); sys.stdout.flush(); "
                              "time.sleep(30)"], env=env, stdout=subprocess.PIPE)
    try:
        assert first.stdout is not None and first.stdout.readline() == b"up\n"
        second = subprocess.run([sys.executable, "-m", "slowlink.drill.lease", str(tmp_path), "run-b", "--",
                                 "/bin/true"], env=env, capture_output=True, text=True, timeout=60)
        assert second.returncode == REFUSED_EXIT and "held by run 'run-a'" in second.stderr
    finally:
        first.kill()
        first.wait()
    third = subprocess.run([sys.executable, "-m", "slowlink.drill.lease", str(tmp_path), "run-c", "--", "/bin/true"],
                           env=env, timeout=60)
    assert third.returncode == 0 and read_lease(tmp_path).epoch == 2  # type: ignore[union-attr]  # the refused one took none


def test_a_taken_rendezvous_port_is_refused_before_any_lease_is_written(tmp_path: Path) -> None:
    import socket

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        res = subprocess.run([sys.executable, "-m", "slowlink.drill.lease", str(tmp_path), "run-a", "--rdzv",
                              f"127.0.0.1:{port}", "--", "/bin/true"], env=env, capture_output=True, text=True,
                             timeout=60)
    assert res.returncode == REFUSED_EXIT and f"rendezvous endpoint (127.0.0.1:{port}) is already served" in res.stderr
    assert read_lease(tmp_path) is None
