# Two entry points (see README): `make demo` runs the default job, `make test` the whole suite.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev,bench,plot,storage,sweep,share,observe,trace]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/slowlink plan examples/ref-64gpu.yaml examples/ref-64gpu-roce.yaml examples/ref-64gpu-25gbe.yaml \
		--workload examples/llama3-8b.yaml

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest

bench: $(STAMP)
	for f in benchmarks/bench_*.py; do $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
