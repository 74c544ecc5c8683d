"""Reading spec files: YAML or JSON into a mapping, and pydantic errors into one readable message.

Everything a user writes goes through :func:`read_mapping`: it reads text (never a binary file), refuses a
key written twice (YAML and JSON would both keep the last one silently) and any non-finite number
(``.inf``/``.nan`` in YAML, ``Infinity``/``NaN`` in Python's JSON), naming the file, the key and the line.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import re
from collections.abc import Hashable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from slowlink.errors import SpecError

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

# Where each kind of file is documented, so that an error points to the page that lists its keys.
DOCS = {
    "cluster": "docs/spec.md",
    "catalog": "docs/spec.md#the-catalog",
    "workload": "docs/workload.md#the-workload-file-keys-are-a-contract-added-never-renamed",
    "scenario": "docs/sim.md#scenarios-slowlink-simulate",
    "record": "docs/bench.md#records-baselines-compare",
    "calibration": "docs/bench.md#calibration",
    "prices": "docs/cost.md#prices-costdatapricesyaml",
    "search": "docs/cost.md#the-design-space-slowlink-search",
    "share": "docs/share.md#scenario-keys",
}

# Top-level keys only one kind of file has: what a file given in the wrong place most likely is.
_KIND_KEYS = {
    "cluster": ("nodes", "gpus_per_node", "gpu", "scale_up", "nics", "fabric"),
    "workload": ("model", "training", "parallel", "overlap"),
    "scenario": ("traffic",),
    "record": ("rows", "kind"),
    "share": ("policies",),
}

# The model_config of every spec file's models: unknown keys are errors, numbers are numbers (strict: `tp: true`
# is not 1, "8" is not 8) and finite. Validators are built at first validation (defer_build), not at import:
# a model only ever validated inside its file's top-level model is then never built on its own, and a command
# builds only the files it reads (a plan loads ~25 models; building them all at import cost it ~7 ms more).
SPEC_CONFIG = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, defer_build=True)
MAX_VALUE_CHARS = 60  # longest input value an error message repeats; longer ones are cut with "..."


class _Dup(Exception):
    def __init__(self, key: object, line: int, first_line: int) -> None:
        super().__init__(key)
        self.key, self.line, self.first_line = key, line, first_line


class _TooLarge(Exception):
    def __init__(self, nodes: int) -> None:
        super().__init__(nodes)
        self.nodes = nodes


# The most values a document may expand to once its aliases are followed: a spec file or a data file of this
# project holds at most a few thousand; an "alias bomb" (nested anchors, each alias repeating the last: 12 lines
# of 9 x 9 x ...) expands to billions and would take minutes to build and walk.
MAX_YAML_NODES = 1_000_000
# A spec file's largest size: specs are a few kB; 64 MiB leaves room for generated ones (a share scenario listing
# a hundred thousand jobs is ~10 MB) and refuses a log or a dump given by mistake before it is read.
MAX_SPEC_BYTES = 64 * 2**20
TOO_DEEP = ("nested too deeply to read (lists or mappings inside each other hundreds of levels deep): a spec nests "
            "a few levels")


def expanded_nodes(node: yaml.Node, limit: int = MAX_YAML_NODES) -> int:
    """How many nodes ``node`` stands for once every alias is expanded, counted up to just past ``limit``; each
    distinct node is counted once per place it is used (an anchor's node object is shared by its aliases, so a
    memo on it keeps the count linear in the file's size; a node that contains itself counts once)."""
    def children(n: yaml.Node) -> list[yaml.Node]:
        if isinstance(n, yaml.SequenceNode):
            return list(n.value)
        if isinstance(n, yaml.MappingNode):
            return [x for pair in n.value for x in pair]
        return []

    sizes: dict[int, int] = {}  # by node identity: an alias is the very node its anchor names
    stack: list[tuple[yaml.Node, bool]] = [(node, False)]
    while stack:  # post-order without recursion: a document may nest as deep as the parser allows
        n, expanded = stack.pop()
        if expanded:
            sizes[id(n)] = min(limit + 1, 1 + sum(sizes[id(c)] for c in children(n)))
        elif id(n) not in sizes:
            sizes[id(n)] = 1  # a node that contains itself (a recursive anchor) counts once
            stack.append((n, True))
            stack.extend((c, False) for c in children(n) if id(c) not in sizes)
    return sizes[id(node)]


# libyaml's parser when PyYAML was built with it (5-10x faster on the catalog and spec files; same documents).
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _UniqueKeyLoader(_SafeLoader):  # type: ignore[valid-type,misc]
    """PyYAML's safe loader, except that a mapping with a key written twice is an error (YAML 1.2, 3.2.1.1:
    "the content of a mapping node is an unordered set of key/value node pairs, with the restriction that
    each of the keys is unique"; PyYAML keeps the last value silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: dict[object, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if isinstance(key, Hashable) and key in seen:
                raise _Dup(key, line, seen[key])
            if isinstance(key, Hashable):
                seen[key] = line
        mapping: dict[Hashable, Any] = super().construct_mapping(node, deep=deep)
        return mapping


# YAML 1.2's core schema (10.3.2) reads 1e12 and 2.5e-3 as numbers; PyYAML follows YAML 1.1, whose floats need a
# dot and a signed exponent (1.0e+12), so `tokens: 1e12` or `speed_gbit_s: 1e-3` would arrive as strings and be
# refused as "not a number". The 1.2 spelling is added to the loader (strings that look like nothing else).
_UniqueKeyLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789"))


class _BoundedLoader(_UniqueKeyLoader):
    """The loader for a document with anchors (``&name``), the only way YAML can repeat a part of itself: its
    expansion is counted on the node graph before anything is built."""

    def get_single_data(self) -> Any:
        """The document, refused before it is built when its aliases expand it past :data:`MAX_YAML_NODES`."""
        node = self.get_single_node()
        if node is None:
            return None
        nodes = expanded_nodes(node)
        if nodes > MAX_YAML_NODES:
            raise _TooLarge(nodes)
        return self.construct_document(node)


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads`` object hook: a key written twice in one JSON object is an error (RFC 8259 4: names
    "SHOULD be unique"; Python keeps the last)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Dup(key, 0, 0)
        out[key] = value
    return out


def read_text(path: Path | str, what: str = "file") -> str:
    """The UTF-8 text of ``path``; a missing, unreadable or binary file is a :class:`SpecError`."""
    p = Path(path)
    if not p.exists():
        raise SpecError(f"{what} ({str(p)!r}) does not exist")
    if p.is_dir():
        raise SpecError(f"{what} ({str(p)!r}) is a directory, not a spec file")
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise SpecError(f"{what} ({str(p)!r}) cannot be read: {exc.strerror}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(f"{p}: not a text file (byte {exc.start} is not UTF-8): give a YAML or JSON file") from None


def non_finite(data: Any, path: str = "") -> Iterator[tuple[str, float]]:
    """Every (field path, value) in nested dicts/lists whose value is an infinite or NaN float (path "" for a
    bare value)."""
    if isinstance(data, float) and not math.isfinite(data):
        yield path, data
    elif isinstance(data, dict):
        for k, v in data.items():
            yield from non_finite(v, f"{path}.{k}" if path else str(k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from non_finite(v, f"{path}.{i}" if path else str(i))


def parse_text(text: str, source: str, as_json: bool, finite: bool = True) -> Any:
    """YAML (or JSON) text into Python objects; syntax errors, repeated keys and (``finite``) non-finite
    numbers are :class:`SpecError`."""
    try:
        # a SafeLoader subclass: only plain YAML types are built, as with yaml.safe_load
        loader = _BoundedLoader if "&" in text else _UniqueKeyLoader  # no anchor, no alias: nothing can expand
        data = json.loads(text, object_pairs_hook=_unique_pairs) if as_json else yaml.load(text, loader)
    except _Dup as dup:
        where = f" at line {dup.line} (first at line {dup.first_line})" if dup.line else ""
        raise SpecError(f"{source}: key {dup.key!r} is written twice{where}: keep one") from None
    except RecursionError:
        raise SpecError(f"{source}: {TOO_DEEP}") from None
    except _TooLarge:
        raise SpecError(f"{source}: its YAML aliases (*name) expand it to more than {MAX_YAML_NODES:,} values: "
                        "must stay below that (a spec holds a few hundred); refused before building it") from None
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(f"{source}: not valid YAML/JSON{where}: {problem}") from None
    try:
        for field, value in non_finite(data) if finite else ():
            raise SpecError(f"{source}{': ' + field if field else ''} ({value}): must be a finite number")
    except RecursionError:
        raise SpecError(f"{source}: {TOO_DEEP}") from None
    return data


def _yaml_kind(data: object) -> str:
    """What a parsed YAML/JSON value is, in the file's words."""
    if isinstance(data, list):
        return "list"
    if isinstance(data, str):
        return "string"
    return "number" if isinstance(data, int | float) and not isinstance(data, bool) else "true/false value"


def read_mapping(path: Path | str, kind: str | None = None) -> dict[str, Any]:
    """Parse a YAML or JSON file whose top level is a mapping; every failure is a :class:`SpecError`.

    With ``kind`` (a key of :data:`OVERRIDABLE`), the ``--set`` overrides of that kind in force
    (:func:`overriding`) are applied to the mapping before anything validates it.
    """
    p = Path(path)
    if p.is_file() and (size := p.stat().st_size) > MAX_SPEC_BYTES:
        raise SpecError(f"{p} ({size:,} bytes) must be at most {MAX_SPEC_BYTES:,} bytes: a spec holds a few kB (the "
                        "bundled catalog ~20 kB); refused before reading it")
    data = parse_text(read_text(p), str(p), p.suffix == ".json")
    if data is None:
        raise SpecError(f"{p}: the file is empty: write the {kind or 'spec'}'s keys (key: value, one per line)")
    if not isinstance(data, dict):
        raise SpecError(f"{p}: the top level must be a mapping of keys (key: value), not a {_yaml_kind(data)}")
    if kind is None:
        return data
    resolved = apply_overrides(data, kind, str(p))
    _remember(str(p), kind, resolved)
    return resolved


# --- ``--set KIND.path=value``: what-if overrides of a spec file without copying it -------------------------

# The kinds of file an override may name, and the prefix it is written with (``--set workload.parallel.tp=4``).
OVERRIDABLE = ("cluster", "workload", "scenario")


@dataclass(frozen=True)
class Override:
    """One ``--set``: the kind of file, the key path inside it, and the value (parsed as YAML)."""

    text: str
    kind: str
    path: tuple[str, ...]
    value: Any


_OVERRIDES: ContextVar[tuple[Override, ...]] = ContextVar("slowlink_overrides", default=())


def parse_override(text: str) -> Override:
    """``KIND.key.path=value`` into an :class:`Override`; the value is a YAML scalar, list or mapping
    (``4``, ``true``, ``2.5``, ``[1, 2]``); a list element is named by its index (``traffic.0.size``)."""
    rule = f"--set ({short(text)}) must be KIND.key.path=value with KIND one of {', '.join(OVERRIDABLE)}"
    name, eq, raw = text.partition("=")
    parts = tuple(name.strip().split("."))
    if not eq or len(parts) < 2 or any(not part for part in parts) or parts[0] not in OVERRIDABLE:
        raise SpecError(rule)
    value = parse_text(raw, f"--set {parts[0]}.{'.'.join(parts[1:])}", as_json=False) if raw.strip() else None
    if value is None:
        raise SpecError(f"--set ({short(text)}): the value is empty; write the value after '='")
    return Override(text, parts[0], parts[1:], value)


@contextlib.contextmanager
def overriding(texts: Sequence[str]) -> Iterator[tuple[Override, ...]]:
    """Apply ``texts`` (``--set`` arguments) to every spec file read inside the block, and remember every
    spec file read there (:func:`inputs_read`)."""
    overrides = tuple(parse_override(t) for t in texts)
    token, read = _OVERRIDES.set(overrides), _INPUTS.set({})
    try:
        yield overrides
    finally:
        _OVERRIDES.reset(token)
        _INPUTS.reset(read)


# Every spec file read inside :func:`overriding` (one command), by (kind, path): what it said once the
# overrides were applied. JSON output carries it, so that a result names exactly what produced it.
_INPUTS: ContextVar[dict[tuple[str, str], dict[str, Any]] | None] = ContextVar("slowlink_inputs", default=None)


def _remember(path: str, kind: str, resolved: dict[str, Any]) -> None:
    read = _INPUTS.get()
    if read is not None:
        read[(kind, path)] = {"kind": kind, "file": path,
                              "set": [o.text for o in _OVERRIDES.get() if o.kind == kind], "spec": resolved}


def inputs_read() -> list[dict[str, Any]]:
    """The spec files this command has read (kind, file, the ``--set`` overrides of its kind, and the mapping
    they resolved to), in the order first read; empty outside :func:`overriding`."""
    return list((_INPUTS.get() or {}).values())


def source_name(path: Path | str, kind: str) -> str:
    """How errors name a spec file: its path, and the ``--set`` overrides of its kind when there are some."""
    texts = [o.text for o in _OVERRIDES.get() if o.kind == kind]
    return f"{path} (with --set {', '.join(texts)})" if texts else str(path)


def apply_overrides(data: dict[str, Any], kind: str, source: str) -> dict[str, Any]:
    """``data`` with every override of ``kind`` in force set at its key path (intermediate mappings are
    created; an index must name an existing list element); ``data`` itself is not changed."""
    overrides = [o for o in _OVERRIDES.get() if o.kind == kind]
    if not overrides:
        return data
    out = copy.deepcopy(data)
    for o in overrides:
        node: Any = out
        for i, key in enumerate(o.path):
            here = ".".join(o.path[: i + 1])
            last = i == len(o.path) - 1
            if isinstance(node, list):
                if not key.isdigit() or int(key) >= len(node):
                    raise SpecError(f"{source}: --set {o.kind}.{here}: {here.rpartition('.')[0] or '(top)'} "
                                    f"is a list of {len(node)}; name an element by its index 0..{len(node) - 1}")
                if last:
                    node[int(key)] = o.value
                else:
                    node = node[int(key)]
            elif isinstance(node, dict):
                if last:
                    node[key] = o.value
                else:
                    node = node.setdefault(key, {})
            else:
                raise SpecError(f"{source}: --set {o.kind}.{here}: {here.rpartition('.')[0]} is "
                                f"{short(node)}, not a mapping; it has no key {key!r}")
    return out


def guess_kind(data: dict[str, Any]) -> str | None:
    """The kind of file (cluster, workload, scenario, record) its top-level keys say, or None if unclear."""
    hits = {kind: sum(k in data for k in keys) for kind, keys in _KIND_KEYS.items()}
    best = max(hits, key=lambda k: hits[k])
    return best if hits[best] >= 1 and list(hits.values()).count(hits[best]) == 1 else None


def check_kind(data: dict[str, Any], expected: str, source: str) -> None:
    """A :class:`SpecError` when a file of another kind is given where ``expected`` is (e.g. swapped files)."""
    kind = guess_kind(data)
    if kind is None or kind == expected or any(k in data for k in _KIND_KEYS.get(expected, ())):
        return
    keys = ", ".join(k for k in _KIND_KEYS[kind] if k in data)
    hint = " (the cluster file comes first: slowlink plan CLUSTER WORKLOAD)" if {kind, expected} == {
        "cluster", "workload"} else ""
    raise SpecError(f"{source}: this looks like a {kind} file (it has {keys}), not a {expected} file{hint}; "
                    f"a {expected} file is described in {DOCS[expected]}")


def short(value: object, limit: int = MAX_VALUE_CHARS) -> str:
    """The value as the file wrote it, cut to ``limit`` characters, so that an error never repeats a whole section:
    strings quoted, long floats short (``1e+09``, not ``1000000000.0``; ``8.0`` stays), None as ``null``."""
    if value is None:
        return "null"
    text = repr(value)
    if isinstance(value, float) and len(text) > len(f"{value:g}") + 2:
        text = f"{value:g}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


_RULES = {  # pydantic's words for a type error, in the rule's words (strict mode: no bool -> int, no str -> int)
    "int_type": "must be an integer",
    "float_type": "must be a number",
    "bool_type": "must be true or false",
    "string_type": "must be a string",
    "finite_number": "must be a finite number",
    "model_type": "must be a mapping of keys",
    "model_attributes_type": "must be a mapping of keys",
    "dict_type": "must be a mapping of keys",
    "list_type": "must be a list",
}


def format_validation_error(exc: ValidationError, source: str, kind: str = "cluster") -> str:
    """Render pydantic errors as ``source: field.path (value): rule``, one per line.

    Values are cut to :data:`MAX_VALUE_CHARS`; a whole section (a mapping) is never repeated; an unknown key
    points to the page that documents the keys of ``kind`` (a cluster, workload, scenario, ...).
    """
    lines = []
    for err in exc.errors():
        loc = ".".join(str(part) for part in err["loc"]) or "(top level)"
        value = err.get("input")
        if err["type"] == "extra_forbidden":
            doc = DOCS.get(kind, DOCS["cluster"])
            lines.append(f"{source}: {loc}: unknown key (the keys of a {kind} file are in {doc})")
        elif err["type"] == "missing":
            lines.append(f"{source}: {loc}: required key is missing")
        else:
            msg = _RULES.get(err["type"]) or err["msg"].removeprefix("Value error, ")
            if not err["loc"]:  # a rule across several keys: its message names them
                lines.append(f"{source}: {msg}")
                continue
            shown = "" if isinstance(value, dict) else f" ({short(value)})"
            lines.append(f"{source}: {loc}{shown}: {msg}")
    return "\n".join(lines)


def validated(model: type[M], data: Any, source: str, kind: str, error: type[SpecError] = SpecError) -> M:
    """``data`` validated as ``model`` (a file's pydantic schema); every error rendered by
    :func:`format_validation_error` into one ``error`` (a :class:`SpecError`, or a subclass such as the
    catalog's) naming ``source``."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise error(format_validation_error(exc, source, kind)) from None


def adapted(adapter: TypeAdapter[T], data: Any, source: str, kind: str) -> T:
    """:func:`validated` for a type that is not a model (a dataclass read back through pydantic's adapter)."""
    try:
        return adapter.validate_python(data)
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc, source, kind)) from None


def check_output(path: Path | str, flag: str, suffixes: tuple[str, ...]) -> Path:
    """An output file a command will write, checked before any work: its folder exists and is writable,
    it is not a folder, and its suffix is one of ``suffixes`` (e.g. ``(".png", ".svg")``)."""
    p = Path(path)
    if p.suffix.lower() not in suffixes:
        raise SpecError(f"{flag} ({str(p)!r}) must end in {', '.join(suffixes)}")
    if p.is_dir():
        raise SpecError(f"{flag} ({str(p)!r}) is a folder: give a file name")
    folder = p.parent
    if not folder.is_dir():
        raise SpecError(f"{flag} ({str(p)!r}): folder {str(folder)!r} does not exist (create it first)")
    if not os.access(folder, os.W_OK):
        raise SpecError(f"{flag} ({str(p)!r}): folder {str(folder)!r} is not writable")
    return p
