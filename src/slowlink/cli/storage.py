"""CLI for the storage area: `slowlink checkpoint-size`, `slowlink checkpoint verify`, `slowlink reshard` and
`slowlink validate storage`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from slowlink.cli.common import clean_errors, out, print_json

_JSON = typer.Option(False, "--json", help="Print JSON.")


@clean_errors
def checkpoint_size_cmd(workload: Path, as_json: bool = _JSON) -> None:
    """Bytes of one checkpoint of a workload: per parameter and per part (no cluster needed)."""
    from slowlink.report.storage import size_table
    from slowlink.spec.workload import load_workload
    from slowlink.storage.checkpoint import checkpoint_size

    w = load_workload(workload)
    size = checkpoint_size(w)
    if as_json:
        print_json(size.to_json())
        return
    out.print(size_table(w.name, size))


@clean_errors
def reshard_cmd(
    src: Annotated[Path, typer.Argument(help="A directory of small files, one sample each.")],
    dst: Annotated[Path, typer.Argument(help="Where the shards and index.json go (created; outside SRC).")],
    shard_size: str = typer.Option("1GB", "--shard-size", help="Largest shard, e.g. 1GB or 64MiB."),
    as_json: bool = _JSON,
) -> None:
    """Reshard a directory of small files into webdataset tar shards with an index, verified and resumable."""
    from slowlink.cli.bench_storage import size_option
    from slowlink.report.storage_bench import reshard_line
    from slowlink.storage.reshard import reshard

    res = reshard(src, dst, size_option("--shard-size", shard_size))
    if as_json:
        print_json(res.to_json())
        return
    out.print(reshard_line(res))


@clean_errors
def checkpoint_verify_cmd(
    directory: Annotated[Path, typer.Argument(help="A torch.distributed.checkpoint directory.")],
    as_json: bool = _JSON,
) -> None:
    """Check a DCP checkpoint's bytes against its MANIFEST.json (or, without one, its files against .metadata);
    exit 1 when it is damaged."""
    from slowlink.bench.manifest import verify
    from slowlink.errors import SpecError, field_error
    from slowlink.report.storage_bench import verify_lines

    if not directory.is_dir():
        raise SpecError(field_error("DIR", str(directory), "is not a directory: give a checkpoint directory"))
    if not (directory / ".metadata").is_file() and not (directory / "MANIFEST.json").is_file():
        raise SpecError(field_error("DIR", str(directory), "holds neither .metadata nor MANIFEST.json: not a "
                                    "torch.distributed.checkpoint directory"))
    v = verify(directory)
    if as_json:
        print_json(v.to_json())
    else:
        for line in verify_lines(v):
            out.print(line, soft_wrap=True)
    if not v.ok:
        raise typer.Exit(1)


@clean_errors
def validate_storage(
    as_json: Annotated[bool, typer.Option("--json", help="JSON on stdout.")] = False,
) -> None:
    """Compare the storage model with published checkpoints and MLPerf Storage results."""
    from slowlink.report.storage import error_summary, misses_and_unscored, validation_table
    from slowlink.storage.validate import cases, not_scored

    cs, unscored = cases(), not_scored()
    scored = [abs(c.error) for c in cs if c.scored]
    if as_json:
        print_json({"cases": [{"id": c.id, "quantity": c.quantity, "predicted": c.predicted,
                               "published": c.measured, "error": c.error, "tolerance": c.tolerance,
                               "scored": c.scored, "known_miss": c.known_miss, "source": c.source} for c in cs],
                    "not_scored": [vars(u) for u in unscored],
                    "mean_abs_error": sum(scored) / len(scored), "max_abs_error": max(scored)})
        return
    out.print(validation_table(cs))
    out.print(error_summary(cs))
    out.print(misses_and_unscored(cs, unscored))


def register(app: typer.Typer, validate_app: typer.Typer) -> None:
    """Add this area's subcommands to the root app and to `slowlink validate`."""
    app.command("checkpoint-size")(checkpoint_size_cmd)
    ckpt = typer.Typer(help="Check checkpoints written by torch.distributed.checkpoint.", add_completion=False)
    ckpt.command("verify")(checkpoint_verify_cmd)
    app.add_typer(ckpt, name="checkpoint")
    app.command("reshard")(reshard_cmd)
    validate_app.command("storage")(validate_storage)
