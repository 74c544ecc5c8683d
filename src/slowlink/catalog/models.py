"""Model presets: the bundled YAML files under ``catalog/presets/``."""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

from slowlink.catalog.store import nearest
from slowlink.errors import SpecError
from slowlink.fileio import parse_text


@functools.cache
def presets() -> dict[str, dict[str, Any]]:
    """Every bundled preset by name."""
    out: dict[str, dict[str, Any]] = {}
    for entry in sorted(resources.files("slowlink.catalog.presets").iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".yaml"):
            out.update(parse_text(entry.read_text(encoding="utf-8"), f"preset {entry.name}", as_json=False))
    return out


def preset(name: str) -> dict[str, Any]:
    """The fields of one preset; an unknown name lists the nearest ones."""
    known = presets()
    if name not in known:
        raise SpecError(f"model.preset ({name!r}) is not a known preset{nearest(name, list(known))}")
    return dict(known[name])
