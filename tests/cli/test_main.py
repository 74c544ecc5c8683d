"""The root command: --version, -h everywhere, the lazy command table, and what `import` costs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from slowlink import __version__
from slowlink.cli.main import COMMANDS, app, full_app

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _first_paragraph(text: str | None) -> str:
    return " ".join((text or "").split("\n\n")[0].split())


def test_version_prints_the_version() -> None:
    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0, res.output
    assert res.output.strip() == __version__


def test_short_help_flag_works_at_every_level() -> None:
    for args in (["-h"], ["plan", "-h"], ["validate", "-h"], ["bench", "collectives", "-h"], ["emulate", "up", "-h"]):
        res = runner.invoke(app, args)
        assert res.exit_code == 0, (args, res.output)
        assert "Usage" in res.output, args


def test_root_help_lists_every_command_without_loading_it() -> None:
    res = runner.invoke(app, ["--help"])
    assert res.exit_code == 0
    for name in COMMANDS:
        assert name in res.output


def test_command_table_matches_the_areas() -> None:
    """Every command the areas register is in COMMANDS, with its own help's first paragraph as summary."""
    group = typer.main.get_group(full_app())
    assert set(group.commands) == set(COMMANDS)
    for name, cmd in group.commands.items():
        assert _first_paragraph(COMMANDS[name][1]) == _first_paragraph(cmd.short_help or cmd.help), name


def test_unknown_command_is_a_usage_error() -> None:
    res = runner.invoke(app, ["no-such-command"])
    assert res.exit_code == 2


def test_help_imports_no_numerical_library() -> None:
    """`slowlink --help` answers without scipy, networkx, numpy or pydantic (they cost ~0.2 s to import)."""
    code = ("import sys\nfrom slowlink.cli.main import app\ntry:\n    app(['--help'])\nexcept SystemExit:\n    pass\n"
            "heavy = {'scipy', 'networkx', 'numpy', 'pydantic'}\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_plan_imports_neither_scipy_nor_networkx() -> None:
    code = ("import sys\nfrom slowlink.cli.main import app\ntry:\n"
            f"    app(['plan', '{EXAMPLES / 'ref-64gpu.yaml'}', '{EXAMPLES / 'llama3-8b.yaml'}', '--json'])\n"
            "except SystemExit as e:\n    assert not e.code, e.code\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in {'scipy', 'networkx'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


# What `plan` (no token budget, no --html, a table) and `collective` must not load: other commands' models and
# numpy.ma, which numpy 2's np.unique(x) imports on its first call (~30 ms of start-up). The failure and cost
# models are part of every plan (its ETTR and cost per token: slowlink.assess); the goodput of a budget is not.
_NOT_FOR_PLAN = ("scipy", "networkx", "matplotlib", "dask", "rich.progress", "numpy.ma", "slowlink.sim.engine",
                 "slowlink.report.html", "slowlink.report.goodput",
                 "slowlink.collectives.calibration", "slowlink.workload.validate", "slowlink.scale",
                 "slowlink.straggler", "slowlink.cost.design", "slowlink.share", "slowlink.observe", "slowlink.bench")


@pytest.mark.parametrize("args", [
    ["plan", str(EXAMPLES / "ref-64gpu.yaml"), str(EXAMPLES / "llama3-8b.yaml")],
    ["plan", str(EXAMPLES / "ref-64gpu.yaml"), str(EXAMPLES / "ref-64gpu-roce.yaml"), "--workload",
     str(EXAMPLES / "llama3-8b.yaml")],
    ["collective", str(EXAMPLES / "ref-64gpu.yaml"), "--size", "1GiB"],
])
def test_plan_and_collective_load_only_what_they_print(args: list[str]) -> None:
    code = ("import sys\nfrom slowlink.cli.main import app\ntry:\n"
            f"    app({args!r})\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            f"bad = {_NOT_FOR_PLAN!r}\n"
            "print(sorted(m for m in sys.modules if any(m == b or m.startswith(b + '.') for b in bad)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("command", ["collective", "simulate", "plan", "bench", "baseline", "catalog", "init"])
def test_a_command_help_loads_no_model(command: str) -> None:
    """`slowlink COMMAND -h` loads neither numpy nor scipy nor networkx: the models load when the command runs."""
    code = ("import sys\nfrom slowlink.cli.main import app\ntry:\n"
            f"    app(['{command}', '-h'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in {'numpy', 'scipy', 'networkx'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_tables_into_a_pipe_are_plain_ascii() -> None:
    res = subprocess.run([sys.executable, "-m", "slowlink", "plan", str(EXAMPLES / "ref-64gpu.yaml"),
                          str(EXAMPLES / "llama3-8b.yaml")], capture_output=True, text=True, check=True)
    assert res.stdout.isascii(), [c for c in res.stdout if not c.isascii()][:5]
    assert "\x1b[" not in res.stdout
    assert "| step time (s)" in res.stdout


def test_shell_completion_names_commands_and_their_options() -> None:
    import os

    def complete(words: str, cword: int) -> list[str]:
        env = {**os.environ, "_SLOWLINK_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)}
        code = "import sys; sys.argv[0] = 'slowlink'; from slowlink.cli.main import run; run()"
        res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        return res.stdout.split()

    assert "plan" in complete("slowlink pl", 1)
    assert "--fidelity" in complete("slowlink plan --fi", 2)


@pytest.mark.parametrize(("given", "expected"), [(None, "4"), ("28", "28")])
def test_openblas_workers_sleep_when_idle_unless_the_user_says(given: str | None, expected: str) -> None:
    """The console entry point shortens OpenBLAS's idle spin (cli.main.run); a value in the environment wins."""
    code = ("import os, sys\nfrom slowlink.cli.main import run\nsys.argv = ['slowlink', '--version']\n"
            "try:\n    run()\nexcept SystemExit:\n    pass\nprint(os.environ['OPENBLAS_THREAD_TIMEOUT'])")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    if given is not None:
        env["OPENBLAS_THREAD_TIMEOUT"] = given
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == expected
