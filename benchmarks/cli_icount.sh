#!/usr/bin/env bash
# Instructions (cachegrind "I refs") one `slowlink ARGS` costs, start to exit, with Python's bytecode cached:
# a start-up measure that load on a shared machine does not move (wall time does: benchmarks/bench_cli.py).
# Needs valgrind. Compare two commits by running it in a worktree of each:
#   benchmarks/cli_icount.sh plan examples/ref-64gpu.yaml examples/llama3-8b.yaml
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
py="${PYTHON:-$root/.venv/bin/python}"
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 1; }
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX="${TMPDIR:-/tmp}/slowlink-icount-pycache" PYTHONPATH="$root/src"
run=(-c 'import sys; from slowlink.cli.main import run; sys.argv = ["slowlink", *sys.argv[1:]]; run()' "$@")
"$py" "${run[@]}" >/dev/null  # fills the bytecode cache
valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null "$py" "${run[@]}" 2>&1 >/dev/null \
  | sed -n 's/.*I *refs: *//p'
