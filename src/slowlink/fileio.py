"""Reading spec files: YAML or JSON into a mapping, and pydantic errors into one readable message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from slowlink.errors import SpecError


def read_mapping(path: Path | str) -> dict[str, Any]:
    """Parse a YAML or JSON file whose top level is a mapping; every failure is a :class:`SpecError`."""
    p = Path(path)
    if not p.exists():
        raise SpecError(f"file ({str(p)!r}) does not exist")
    if p.is_dir():
        raise SpecError(f"file ({str(p)!r}) is a directory, not a spec file")
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"file ({str(p)!r}) cannot be read: {exc.strerror}") from None
    try:
        data = json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(f"{p}: not valid YAML/JSON{where}: {problem}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{p}: the top level must be a mapping of keys, got {type(data).__name__}")
    return data


def format_validation_error(exc: ValidationError, source: str) -> str:
    """Render pydantic errors as ``source: field.path (value): message``, one per line."""
    lines = []
    for err in exc.errors():
        loc = ".".join(str(part) for part in err["loc"]) or "(top level)"
        value = err.get("input")
        if err["type"] == "extra_forbidden":
            lines.append(f"{source}: {loc}: unknown key (allowed keys are documented in docs/spec.md)")
        elif err["type"] == "missing":
            lines.append(f"{source}: {loc}: required key is missing")
        else:
            msg = err["msg"].removeprefix("Value error, ")
            lines.append(f"{source}: {loc} ({value!r}): {msg}")
    return "\n".join(lines)
