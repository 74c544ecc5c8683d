"""The package reads as two wings over a shared foundation, with rendering and the CLI on top.

Every module's imports are read with ``ast`` (function-level and ``TYPE_CHECKING`` imports included) and held
to the rules:

* the foundation (``spec``, ``catalog``, ``topology`` and the top-level helpers) imports neither wing;
* the model wing (the models and the chain above them) never imports the measuring wing;
* the measuring wing (what runs or reads a measurement) may import the model wing where it compares a
  measurement with a prediction; within it a package imports only packages of a lower tier (``emulate`` and
  ``bench`` at the base), never one beside it;
* neither wing imports ``report`` or ``cli``;
* no package imports a private name (``_x``) or private module from another package;
* no two modules import each other.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = SRC / "slowlink"

FOUNDATION = {"", "units", "errors", "fileio", "procs", "progress", "logtags", "spec", "catalog", "topology"}
MODEL = {"collectives", "workload", "sim", "storage", "reliability", "cost", "share", "search", "straggler", "trace",
         "sites", "assess", "scale"}
CHAIN = {"assess", "scale", "search"}  # the chain and what runs it: the models below it never import it
MEASURING_TIER = {"emulate": 0, "bench": 0, "observe": 1, "drill": 2, "probe": 2}
TOP = {"report", "cli", "__main__"}


def module_name(path: Path, src: Path = SRC) -> str:
    parts = path.relative_to(src).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def area(module: str) -> str:
    """The package (or top-level module) of ``slowlink`` a module belongs to; '' for ``slowlink`` itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def imports(path: Path, src: Path = SRC) -> Iterator[tuple[str, str | None, int]]:
    """(imported module, imported name or None, line) of every ``slowlink`` import in the file."""
    module = module_name(path, src)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target.split(".")[0] == "slowlink":
                for alias in node.names:
                    yield target, alias.name, node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "slowlink":
                    yield alias.name, None, node.lineno


def graph(root: Path = ROOT) -> dict[str, list[tuple[str, str | None, int]]]:
    """Every module under ``root`` and the ``slowlink`` modules it imports (a ``from pkg import sub`` of a
    submodule counts as importing ``pkg.sub``)."""
    files = {module_name(p, root.parent): p for p in root.rglob("*.py")}
    out: dict[str, list[tuple[str, str | None, int]]] = {}
    for mod, path in files.items():
        edges = []
        for target, name, line in imports(path, root.parent):
            sub = f"{target}.{name}" if name else ""
            edges.append((sub if sub in files else target, name, line))
        out[mod] = edges
    return out


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def violations(root: Path = ROOT) -> list[str]:
    """Every broken rule of the tree under ``root``, one line each (empty when it holds)."""
    g = graph(root)
    bad: list[str] = []
    for mod, edges in sorted(g.items()):
        a = area(mod)
        if a not in FOUNDATION | MODEL | TOP and a not in MEASURING_TIER:
            bad.append(f"{mod}: package {a!r} is in no layer: add it to FOUNDATION, MODEL, MEASURING_TIER or TOP")
            continue
        for target, name, line in edges:
            b = area(target)
            where = f"{mod}:{line} imports {target}" + (f".{name}" if name and not target.endswith(f".{name}") else "")
            if a == b:
                continue
            if a in FOUNDATION and b not in FOUNDATION:
                bad.append(f"{where}: the foundation imports no wing")
            elif a in MODEL and b in MEASURING_TIER:
                bad.append(f"{where}: the model wing never imports the measuring wing")
            elif a in MODEL - CHAIN and b in CHAIN:
                bad.append(f"{where}: a model never imports the chain above it ({b})")
            elif a in MEASURING_TIER and b in MEASURING_TIER and MEASURING_TIER[b] >= MEASURING_TIER[a]:
                bad.append(f"{where}: a measuring package imports only lower tiers ({b} is tier "
                           f"{MEASURING_TIER[b]}, {a} tier {MEASURING_TIER[a]})")
            elif a not in TOP and b in TOP:
                bad.append(f"{where}: only report and cli import report or cli")
            if any(private(p) for p in target.split(".")) or (name is not None and private(name)):
                bad.append(f"{where}: a private name of another package")
    for mod, edges in sorted(g.items()):
        for target, _, line in edges:
            if mod < target and any(t == mod for t, _, _ in g.get(target, [])):
                bad.append(f"{mod}:{line} and {target} import each other")
    return sorted(set(bad))


def test_the_package_reads_as_two_wings() -> None:
    bad = violations()
    assert not bad, "\n".join(bad)


def test_every_layer_names_a_package_that_exists() -> None:
    present = {area(module_name(p)) for p in ROOT.rglob("*.py")}
    assert set(MEASURING_TIER) | MODEL | TOP | FOUNDATION <= present


@pytest.mark.parametrize(("files", "rule"), [
    ({"straggler/emulated.py": "from slowlink.emulate.net import up\n"}, "never imports the measuring wing"),
    ({"observe/emulated.py": "from slowlink.emulate.net import _env\n"}, "a private name of another package"),
    ({"topology/fabric.py": "from slowlink.topology.degraded import affine_nics\n",
      "topology/degraded.py": "from slowlink.topology.fabric import Topology\n"}, "import each other"),
    ({"probe/find.py": "from slowlink.drill.harness import run_drill\n"}, "imports only lower tiers"),
    ({"bench/compare.py": "from slowlink.probe.find import lateness\n"}, "imports only lower tiers"),
    ({"emulate/net.py": "from slowlink.report.emulate import plan_summary\n"}, "only report and cli"),
    ({"spec/cluster.py": "from slowlink.workload.step import plan\n"}, "the foundation imports no wing"),
    ({"gadgets/x.py": "x = 1\n"}, "is in no layer"),
    ({"reliability/goodput.py": "from slowlink.assess import assess\n"}, "never imports the chain above it"),
])
def test_each_rule_catches_its_breach(tmp_path: Path, files: dict[str, str], rule: str) -> None:
    root = tmp_path / "slowlink"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    bad = violations(root)
    assert any(rule in line for line in bad), bad
