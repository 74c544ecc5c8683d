"""A design of a search written out as the files the other commands take: ``cluster.yaml`` (the design on the
fewest tiers that fit, with the space's storage: and reliability:), ``workload.yaml`` (the space's workload with
the design's layout and the token budget) and, when the space names its own quotes, ``prices.yaml``. ``slowlink
cost`` on them gives the search's numbers for that design (the same chain, :mod:`slowlink.assess`)."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from slowlink.cost.design import fitting_design
from slowlink.errors import SpecError
from slowlink.search.evaluate import Point
from slowlink.search.space import Space


@dataclass(frozen=True)
class Emitted:
    """The files written for one design, and the command that prices them as the search did."""

    cluster: Path
    workload: Path
    prices: Path | None

    def command(self, verb: str = "cost") -> str:
        extra = "" if self.prices is None else f" --prices {self.prices}"
        return f"slowlink {verb} {self.cluster} {self.workload}{extra}"


def check_emit_dir(path: Path) -> Path:
    """``--emit``'s folder, checked before the search runs: it is a folder or can be made in a writable one."""
    if path.exists() and not path.is_dir():
        raise SpecError(f"--emit ({str(path)!r}) is a file: give a folder")
    parent = path if path.is_dir() else path.parent
    if not parent.is_dir():
        raise SpecError(f"--emit ({str(path)!r}): folder {str(parent)!r} does not exist (create it first)")
    if not os.access(parent, os.W_OK):
        raise SpecError(f"--emit ({str(path)!r}): folder {str(parent)!r} is not writable")
    return path


def _write(path: Path, data: dict[str, Any], head: str) -> None:
    """``data`` as YAML under a comment, through a temporary file renamed into place (never half-written)."""
    text = f"# {head}\n" + yaml.safe_dump(data, sort_keys=False)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def emit(space: Space, p: Point, folder: Path) -> Emitted:
    """Write design ``p`` of ``space`` into ``folder`` (module docstring)."""
    if p.rule:
        raise SpecError(f"--emit: configuration {p.index} was removed by {p.rule}: nothing to write")
    n = len(space.layouts)
    lay = space.layout(p.index % n)
    cluster, _ = fitting_design(space.design_of(p.index), space.prices, space.shared)
    folder.mkdir(exist_ok=True)
    what = f"slowlink search {space.name}: configuration {p.index}"
    out = Emitted(folder / "cluster.yaml", folder / "workload.yaml",
                  folder / "prices.yaml" if space.prices_path is not None else None)
    _write(out.cluster, cluster, what)
    _write(out.workload, space.workload_mapping(lay, p.dp), what)
    if out.prices is not None and space.prices_path is not None:
        tmp = out.prices.with_name(".prices.yaml.tmp")
        shutil.copyfile(space.prices_path, tmp)
        os.replace(tmp, out.prices)
    return out
