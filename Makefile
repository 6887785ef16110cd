# Everything a fresh machine needs: `make demo` runs the main job, `make test` the test suite.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) scripts/demo.py

test: $(STAMP)
	$(PY) -m pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check airflow_delta_provider tests benchmarks scripts
	$(VENV)/bin/ruff format --check airflow_delta_provider tests benchmarks scripts

bench: $(STAMP)
	$(PY) benchmarks/generate.py
	$(PY) benchmarks/bench_read.py --write-readme

clean:
	rm -rf $(VENV) .demo benchmarks/data
