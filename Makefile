# Everything a fresh machine needs: `make demo` runs the main job, `make docs` serves the docs site,
# `make test` runs the test suite. Each step is quiet when it goes well: a green `make test` prints
# pytest's summaries, and a failing step prints what failed.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
MAKEFLAGS += --no-print-directory
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The demo's own venv: the provider, PySpark and delta-rs (the `demo` extra), no development tools.
DEMO_VENV := .venv-demo
DEMO_STAMP := $(DEMO_VENV)/.installed
# Material for MkDocs prints a notice about its successor on every build; the site does not need it.
export NO_MKDOCS_2_WARNING := 1
MKDOCS := $(VENV)/bin/mkdocs
SOURCES := airflow_delta_provider tests benchmarks scripts dags_examples

# The oldest Airflow the `apache-airflow>=3.1` pin admits, tested in a second venv with the same
# versions of everything else as $(VENV) (its `pip freeze`, without Airflow's own packages, is the
# constraint), except what that Airflow cannot run with, pinned to what was current when it was released: structlog 26 removed
# `structlog.dev.Styles`, which Airflow 3.1 imports; with cadwyn 7 (and the FastAPI it needs) its
# execution API refuses every task start (422); FastAPI 0.118 commits a request's session after
# the response is sent, so what one REST call wrote is not yet there for the next.
OLDEST_AIRFLOW := 3.1.0
OLDEST_PINS := apache-airflow==$(OLDEST_AIRFLOW) structlog==25.4.0 cadwyn==5.4.6 \
	"fastapi[standard-no-fastapi-cloud-cli]==0.117.1"
OLDEST := .venv-airflow-$(OLDEST_AIRFLOW)
OLDEST_STAMP := $(OLDEST)/.installed
# What runs on the oldest Airflow: the provider's surface (provider info, hook, sensor, trigger,
# assets, compat) and the deployed tier.
OLDEST_TESTS := tests/unit/test_get_provider_info.py tests/unit/hooks tests/unit/sensors \
	tests/unit/triggers tests/unit/assets tests/unit/utils tests/unit/plugins tests/deployed

.PHONY: demo docs docs-build test test-newest test-oldest lint typecheck system-deps bench clean

# Runs a command with its output (pip's, apt's, npm's) kept aside and printed only when it fails.
QUIET = sh -c 'log=$$(mktemp); "$$@" >"$$log" 2>&1 || { status=$$?; cat "$$log"; rm -f "$$log"; exit $$status; }; rm -f "$$log"' quiet

# $(call install,<venv>,<pip install arguments>): the venv, created when missing, and what it holds.
define install
	@test -x $(1)/bin/python || $(PYTHON) -m venv $(1)
	@$(QUIET) $(1)/bin/python -m pip install --quiet --upgrade pip
	@$(QUIET) $(1)/bin/python -m pip install --quiet $(2)
endef

$(STAMP): pyproject.toml
	@echo "make: installing the provider and its development tools into $(VENV) (once)"
	$(call install,$(VENV),-e ".[dev]")
	@touch $(STAMP)

$(DEMO_STAMP): pyproject.toml
	@echo "make: installing the provider, PySpark and delta-rs into $(DEMO_VENV) (once)"
	$(call install,$(DEMO_VENV),-e ".[demo]")
	@touch $(DEMO_STAMP)

$(OLDEST_STAMP): $(STAMP)
	@echo "make: installing Airflow $(OLDEST_AIRFLOW) beside the same versions of the rest into $(OLDEST) (once)"
	@test -x $(OLDEST)/bin/python || $(PYTHON) -m venv $(OLDEST)
	@$(PY) -m pip freeze --exclude-editable \
		| grep -v -i -E '^(apache-airflow|airflow-delta-provider|structlog|cadwyn|fastapi|starlette)' \
		> $(OLDEST)/constraints.txt
	$(call install,$(OLDEST),-c $(OLDEST)/constraints.txt $(OLDEST_PINS) -e ".[dev]")
	@touch $(OLDEST_STAMP)

# What the tests need outside the venvs, installed only when missing, each announced before it is:
# from the npm registry, globally (npm install -g), Azurite (the Azure Blob Storage emulator) and
# s3rver (an S3-compatible server that ignores conditional writes, which commits must refuse) for
# the object-store tests; from the OS packages (as root, with apt), PostgreSQL for the deployed
# tier's metadata database, and Chromium for its browser tests of the Delta view (driven headless
# through its DevTools protocol: no browser download).
NPM_TOOLS := azurite@3 s3rver@3
system-deps:
	@command -v azurite-blob >/dev/null && command -v s3rver >/dev/null || { \
		if command -v npm >/dev/null; then \
			echo "system-deps: installing $(NPM_TOOLS) globally with npm (Azure Blob Storage emulator; an S3 server without conditional writes) for the object-store tests"; \
			$(QUIET) npm install -g --no-audit --no-fund $(NPM_TOOLS); \
		else echo "system-deps: npm is missing: install Node.js and npm (Debian: apt-get install npm) for the Azure tests."; fi; }
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			echo "system-deps: installing postgresql with apt-get (the deployed tier's metadata database)"; \
			$(QUIET) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(QUIET) apt-get install -y -qq --no-install-recommends postgresql; \
		else echo "system-deps: PostgreSQL is missing: install it (Debian: sudo apt-get install postgresql) for the deployed tier."; fi; }
	@command -v chromium >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			echo "system-deps: installing chromium and fonts-dejavu-core with apt-get (the deployed tier's browser tests of the Delta view)"; \
			$(QUIET) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(QUIET) apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core; \
		else echo "system-deps: Chromium is missing: install it (Debian: sudo apt-get install chromium) for the deployed tier's browser tests."; fi; }

demo: $(DEMO_STAMP)
	@$(DEMO_VENV)/bin/python scripts/demo.py

# The docs site on http://127.0.0.1:8000, rebuilt on every change; `docs-build` writes it to site/,
# strictly (a broken link, anchor or cross-reference fails it, as in tests/test_docs_site.py).
docs: $(STAMP)
	@$(MKDOCS) serve --dev-addr 127.0.0.1:8000

docs-build: $(STAMP)
	@$(QUIET) $(MKDOCS) build --strict

# The whole suite: lint and type checks first (fast), then every test tier on the newest Airflow
# that installs, then the provider's surface and the deployed tier on the oldest one.
test: lint typecheck test-newest test-oldest

# -q: a dot per test and pytest's summary; a failure is printed in full, with its captured output.
test-newest: $(STAMP) system-deps
	@$(PY) -m pytest -q

test-oldest: $(OLDEST_STAMP) system-deps
	@$(OLDEST)/bin/python -m pytest -q $(OLDEST_TESTS)

lint: $(STAMP)
	@$(VENV)/bin/ruff check --quiet $(SOURCES)
	@$(VENV)/bin/ruff format --check --quiet $(SOURCES)

# mypy's "Success" line is its only output on a clean run; errors print with their summary.
typecheck: $(STAMP)
	@$(VENV)/bin/mypy --no-error-summary || { $(VENV)/bin/mypy; exit 1; }

bench: $(STAMP)
	$(PY) benchmarks/generate.py
	$(PY) benchmarks/bench_read.py --write-readme

clean:
	rm -rf $(VENV) $(DEMO_VENV) $(OLDEST) .venv-spark-client .demo site benchmarks/data
