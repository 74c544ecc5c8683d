"""Checkpoint manifests: a DCP checkpoint sealed with SHA-256 digests, then damaged the two ways the drills damage
it (8 bytes of a tensor flipped, a file cut in half); `slowlink checkpoint verify` names the file and the rule,
exits 1, and reads a user's checkpoint without a manifest for structure only."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slowlink.bench.manifest import digest_file, payload, verify, write_manifest
from slowlink.cli.main import app
from slowlink.drill.worker import flip_tensor_bytes

torch = pytest.importorskip("torch")
runner = CliRunner()


def _checkpoint(where: Path, sealed: bool = True) -> Path:
    import torch.distributed.checkpoint as dcp

    state = {f"w{i}": torch.arange(4096, dtype=torch.float32) * (i + 1) for i in range(4)}
    d = where / "step_00000004"
    dcp.save(state, checkpoint_id=str(d), no_dist=True)
    if sealed:
        write_manifest(d, [digest_file(d / n) for n in payload(d)])
    return d


def test_a_sealed_checkpoint_is_intact_and_loads(tmp_path: Path) -> None:
    d = _checkpoint(tmp_path)
    v = verify(d)
    assert v.ok and v.digests and v.files == len(payload(d)) and v.hashed_bytes > 4 * 4096 * 4


def test_flipped_bytes_break_the_digest_and_nothing_else_notices(tmp_path: Path) -> None:
    import torch.distributed.checkpoint as dcp

    d = _checkpoint(tmp_path)
    distcp = next(d.glob("__0_*.distcp"))
    flip_tensor_bytes(d, distcp.name)
    back = {f"w{i}": torch.zeros(4096) for i in range(4)}
    dcp.load(back, checkpoint_id=str(d), no_dist=True)  # DCP loads it silently...
    assert any(not torch.equal(back[f"w{i}"], torch.arange(4096, dtype=torch.float32) * (i + 1)) for i in range(4))
    v = verify(d)  # ...the manifest does not
    assert not v.ok and [p.rule for p in v.problems] == ["sha256"] and v.problems[0].file == distcp.name


def test_a_truncated_file_breaks_the_size_with_or_without_a_manifest(tmp_path: Path) -> None:
    d = _checkpoint(tmp_path)
    distcp = next(d.glob("__0_*.distcp"))
    os.truncate(distcp, distcp.stat().st_size // 2)
    assert [p.rule for p in verify(d).problems] == ["size"]
    (d / "MANIFEST.json").unlink()
    v = verify(d)
    assert not v.ok and not v.digests and [p.rule for p in v.problems] == ["extent"]


def test_verify_shares_the_files_between_ranks(tmp_path: Path) -> None:
    d = _checkpoint(tmp_path)
    parts = [verify(d, (r, 2)) for r in range(2)]
    assert sum(p.files for p in parts) == verify(d).files and all(p.ok for p in parts)


def test_cli_verify_exit_codes_and_json(tmp_path: Path) -> None:
    d = _checkpoint(tmp_path)
    ok = runner.invoke(app, ["checkpoint", "verify", str(d), "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["ok"] is True
    flip_tensor_bytes(d, next(d.glob("__0_*.distcp")).name)
    bad = runner.invoke(app, ["checkpoint", "verify", str(d)])
    assert bad.exit_code == 1 and "DAMAGED" in bad.output and "(rule sha256)" in bad.output, bad.output
    user = _checkpoint(tmp_path / "user", sealed=False)
    plain = runner.invoke(app, ["checkpoint", "verify", str(user)])
    assert plain.exit_code == 0 and "bytes not proven" in plain.output, plain.output


def test_cli_verify_bad_input(tmp_path: Path, cli_fails: Callable[..., str]) -> None:
    cli_fails(["checkpoint", "verify", str(tmp_path / "nope")], "DIR", "nope", "is not a directory")
    (tmp_path / "empty").mkdir()
    cli_fails(["checkpoint", "verify", str(tmp_path / "empty")], "DIR", "holds neither .metadata")
