# Single entry point for building, checking and running reflexr-graph.
# Every tool is called through .venv/bin so nothing depends on an activated venv.

.DEFAULT_GOAL := help
SHELL := /bin/bash

VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST := $(BIN)/pytest

# First interpreter that actually runs and is >= 3.11 (pyenv shims exist for versions that
# are not installed, so `command -v` alone is not enough).
PY_CANDIDATES := python3.11 python3.12 python3.13 python3.14 python3 python
PY_OK := import sys; sys.exit(sys.version_info < (3, 11))

# A venv that no longer runs (moved, interpreter removed) is rebuilt even if the stamp is fresh.
ifneq ($(shell $(BIN)/python -c '$(PY_OK)' >/dev/null 2>&1 && echo ok),ok)
$(STAMP): FORCE
endif

.PHONY: help install redis rabbitmq sentinel browser tmux lint fmt test test-fast test-cluster run serve bench clean FORCE

help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' \
		$(MAKEFILE_LIST)

install: $(STAMP) ## Create .venv (Python >= 3.11) and install the package with the dev and ai extras

# The ai extra too: reflexr_graph.ai is linted, type-checked and tested like the rest of the package.
$(STAMP): pyproject.toml
	@if ! $(BIN)/python -c '$(PY_OK)' >/dev/null 2>&1; then \
		py=""; \
		for c in $(PY_CANDIDATES); do \
			if $$c -c '$(PY_OK)' >/dev/null 2>&1; then py=$$c; break; fi; \
		done; \
		if [ -z "$$py" ]; then echo "error: Python >= 3.11 is required (none of: $(PY_CANDIDATES))" >&2; exit 1; fi; \
		echo "creating $(VENV) with $$py ($$($$py -V))"; \
		rm -rf $(VENV) && $$py -m venv $(VENV) && $(BIN)/python -m pip install -q --upgrade pip; \
	fi
	$(BIN)/python -m pip install -q -e '.[dev,ai]'
	@touch $@

redis: ## Make sure redis-server is installed (tests start their own instances)
	@bash scripts/ensure-redis.sh

rabbitmq: ## Make sure rabbitmq-server is installed (the RabbitMQ broker tests start their own node)
	@bash scripts/ensure-rabbitmq.sh

sentinel: ## Make sure redis-sentinel is installed (the failover tests start their own)
	@bash scripts/ensure-sentinel.sh

browser: ## Make sure Debian's chromium and chromium-driver are installed (the console's browser tests)
	@bash scripts/ensure-chromium.sh

tmux: ## Make sure tmux is installed (the tests of `reflexr-graph top` run it in a real terminal)
	@bash scripts/ensure-tmux.sh

lint: install ## ruff check, ruff format --check, mypy (strict)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

fmt: install ## Format and autofix with ruff
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# pytest exits 5 when it collects nothing; that must fail rather than look green.
define run_pytest
	@rc=0; $(PYTEST) $(1) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "error: no tests collected" >&2; exit 1; fi; \
	exit $$rc
endef

# Three xdist workers, each with its own session Redis (tests/conftest.py); the tests that share a
# costly session fixture (a RabbitMQ node, a browser) are grouped onto one worker (xdist_group).
XDIST := -n $(or $(TEST_WORKERS),3) --dist loadgroup

test: install redis rabbitmq sentinel browser tmux lint ## Lint, then the full test suite with coverage (TEST_WORKERS=3)
	$(call run_pytest,$(XDIST) --cov --cov-branch --cov-report=term --durations=15)

test-fast: install redis rabbitmq sentinel browser tmux ## Tests without the slow crash/chaos ones, no lint
	$(call run_pytest,$(XDIST) -m "not slow")

test-cluster: install redis ## The store on a private 3-primary Redis Cluster (tests/cluster)
	$(call run_pytest,tests/cluster)

run: install redis ## The showcase: private Redis, two workers, a crash, a dead letter and a replay
	$(BIN)/reflexr-graph demo

serve: install redis ## The showcase, then its console at http://127.0.0.1:8080/ until Ctrl-C
	$(BIN)/reflexr-graph demo --serve

bench: install redis ## Run every benchmark and regenerate docs/benchmarks.md
	$(BIN)/python -m bench

clean: ## Remove .venv, .run and caches
	rm -rf $(VENV) .run .pytest_cache .mypy_cache .ruff_cache htmlcov dist build .coverage .coverage.*
	find . -name __pycache__ -type d -prune -not -path './.git/*' -exec rm -rf {} +
	find . -maxdepth 1 -name '*.egg-info' -exec rm -rf {} +

FORCE:
