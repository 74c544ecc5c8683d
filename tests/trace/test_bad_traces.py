"""Bad traces get one clean message naming the file, the value and the rule, exit 2, no traceback; the streaming
reader decodes what json.load decodes, whatever the chunk boundaries."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slowlink.cli.main import app
from slowlink.trace import stream
from slowlink.trace.stream import iter_trace

DATA = Path(__file__).parents[1] / "data" / "traces"
GLOO0, GLOO1 = DATA / "gloo-ddp-rank-0.json.gz", DATA / "gloo-ddp-rank-1.json.gz"
runner = CliRunner()


def _fails(args: list[str], *needles: str) -> str:
    res = runner.invoke(app, ["read", "kineto", *args])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and (res.exception is None or isinstance(res.exception, SystemExit))
    text = " ".join(res.output.split())
    for needle in needles:
        assert needle in text, text
    return text


def _write(path: Path, trace: dict[str, object]) -> Path:
    path.write_text(json.dumps(trace))
    return path


def _events(path: Path) -> dict[str, object]:
    with gzip.open(path, "rt") as fh:
        return dict(json.load(fh))


def test_truncated_json(tmp_path: Path) -> None:
    text = gzip.decompress(GLOO0.read_bytes())
    cut = tmp_path / "cut.json"
    cut.write_bytes(text[: len(text) // 2])
    _fails([str(cut)], "cut.json", "not complete JSON", "truncated")


def test_not_json_and_not_gzip(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text("hello")
    _fails([str(tmp_path / "a.json")], "a.json", "'h'", "not a complete Chrome trace JSON object")
    (tmp_path / "b.json.gz").write_bytes(b"\x1f\x8b" + b"\x00" * 40)
    _fails([str(tmp_path / "b.json.gz")], "b.json.gz", "cannot be read")


def test_a_json_array_is_not_a_kineto_trace(tmp_path: Path) -> None:
    _fails([str(_write(tmp_path / "arr.json", [{"ph": "X"}]))], "arr.json", "'['", "expected one of '{'")  # type: ignore[arg-type]


def test_no_steps(tmp_path: Path) -> None:
    trace = _events(GLOO0)
    trace["traceEvents"] = [e for e in trace["traceEvents"]  # type: ignore[attr-defined]
                            if not str(e.get("name", "")).startswith("ProfilerStep")]
    _fails([str(_write(tmp_path / "nosteps.json", trace))], "nosteps.json", "no ProfilerStep#N",
           "prof.step()")


def test_no_kernels_and_no_cpu_collectives(tmp_path: Path) -> None:
    trace = _events(GLOO0)
    trace["traceEvents"] = [e for e in trace["traceEvents"]  # type: ignore[attr-defined]
                            if not str(e.get("name", "")).startswith("gloo:")]
    _fails([str(_write(tmp_path / "alone.json", trace))], "alone.json", "no device kernel and no CPU collective",
           "nothing to measure")


def test_mixed_jobs() -> None:
    _fails([str(DATA / "hta-vit-rank-0.json.gz"), str(DATA / "hta-nccl-a100-rank-0.json.gz")],
           "world_size 128", "world_size 2", "not of one job")
    _fails([str(GLOO0), str(DATA / "hta-nccl-a100-rank-0.json.gz")], "backend 'gloo'", "backend 'nccl'")


def test_the_same_rank_twice(tmp_path: Path) -> None:
    shutil.copy(GLOO0, tmp_path / "again.json.gz")
    _fails([str(GLOO0), str(tmp_path / "again.json.gz")], "rank 0", "two files of the same rank")


def test_too_big(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(stream, "MAX_TRACE_BYTES", 100_000)
    monkeypatch.setattr(stream, "CHUNK_BYTES", 65_536)
    # gzip'd: counted as it is decompressed (22 KB on disk, 340 KB of JSON)
    _fails([str(GLOO1)], "gloo-ddp-rank-1.json.gz", "GiB of JSON", "a trace must be at most")
    plain = tmp_path / "plain.json"
    plain.write_bytes(gzip.decompress(GLOO1.read_bytes()))
    _fails([str(plain)], "plain.json", "GiB of JSON", "a trace must be at most")  # refused before it is read


def test_missing_and_empty(tmp_path: Path) -> None:
    _fails([str(tmp_path / "nope.json")], "nope.json", "(missing)")
    _fails([str(tmp_path)], "a directory with no *.json")


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 20])
def test_stream_decodes_what_json_load_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    trace = {"schemaVersion": 1, "deviceProperties": [{"name": "GPU ü", "numSms": 132}],
             "traceEvents": [{"ph": "X", "name": "ker\u00e9nel \u4e2d", "ts": 1234567.125, "dur": 10},
                             {"ph": "i", "name": "x", "ts": 12345678901234}],
             "baseTimeNanoseconds": 1700000000123456789}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace, ensure_ascii=False), encoding="utf-8")
    monkeypatch.setattr(stream, "CHUNK_BYTES", chunk)
    got = list(iter_trace(path))
    assert [v for k, v in got if k == "traceEvents"] == trace["traceEvents"]
    assert {k: v for k, v in got if k != "traceEvents"} == {k: v for k, v in trace.items() if k != "traceEvents"}


def _shifted(events: list[dict[str, object]], by_us: float, **changes: object) -> list[dict[str, object]]:
    return [{**e, "ts": float(e["ts"]) + by_us, **changes} if "ts" in e else e for e in events]  # type: ignore[arg-type]


def test_one_file_of_two_processes_or_runs(tmp_path: Path) -> None:
    """A file that merges two processes, two profiling runs or two devices is refused, each with its reason."""
    trace = _events(GLOO0)
    events = list(trace["traceEvents"])  # type: ignore[call-overload]
    steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    later = 10 * max(float(e["ts"]) + float(e["dur"]) - float(steps[0]["ts"]) for e in steps)
    _fails([str(_write(tmp_path / "twice.json", {**trace, "traceEvents": events + _shifted(steps, later)}))],
           "twice.json", f"({steps[0]['name']} appears 2 times)", "one rank's one profiling run")
    other = _shifted(steps, later, pid=99999999)
    renamed = [{**e, "name": f"ProfilerStep#{1000 + i}"} for i, e in enumerate(other)]
    _fails([str(_write(tmp_path / "pids.json", {**trace, "traceEvents": events + renamed}))],
           "pids.json", "ProfilerStep#N of 2 processes", "99999999")
    inside = [{**steps[0], "name": "ProfilerStep#999", "ts": float(steps[0]["ts"]) + 1.0}]
    _fails([str(_write(tmp_path / "overlap.json", {**trace, "traceEvents": events + inside}))],
           "overlap.json", "ProfilerStep#999 starts", "before", "ends)")


def test_kernels_of_two_devices_in_one_file(tmp_path: Path) -> None:
    trace = _events(DATA / "hta-mi250-rank-0.json.gz")
    events = [{**e, "args": {**e["args"], "device": 7}} if e.get("cat") == "kernel" and i % 2 else e
              for i, e in enumerate(trace["traceEvents"])]  # type: ignore[attr-defined]
    _fails([str(_write(tmp_path / "devs.json", {**trace, "traceEvents": events}))],
           "devs.json", "(kernels on devices 2, 7)", "one rank's one profiling run")


def test_ranks_of_different_runs(tmp_path: Path) -> None:
    trace = _events(GLOO1)
    events = [{**e, "name": f"ProfilerStep#{500 + int(str(e['name']).split('#')[1])}"}
              if str(e.get("name", "")).startswith("ProfilerStep#") else e
              for e in trace["traceEvents"]]  # type: ignore[attr-defined]
    _fails([str(GLOO0), str(_write(tmp_path / "later.json", {**trace, "traceEvents": events}))],
           "ProfilerStep numbers", "later.json: 50", "not of one run")
