# Everything a fresh machine needs: `make demo` runs the main job, `make test` the test suite.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SOURCES := airflow_delta_provider tests benchmarks scripts dags_examples

.PHONY: demo test lint typecheck bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) scripts/demo.py

# The whole suite: lint and type checks first (fast), then every test tier.
test: lint typecheck
	$(PY) -m pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check $(SOURCES)
	$(VENV)/bin/ruff format --check $(SOURCES)

typecheck: $(STAMP)
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) benchmarks/generate.py
	$(PY) benchmarks/bench_read.py --write-readme

clean:
	rm -rf $(VENV) .demo benchmarks/data
