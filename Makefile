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

.PHONY: help install lock test-latest redis rabbitmq sentinel browser tmux faketime lint fmt test test-fast test-cluster run serve bench clean FORCE

help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' \
		$(MAKEFILE_LIST)

install: $(STAMP) ## Create .venv (Python >= 3.11) with exactly the locked set (uv.lock), every extra included

# uv installs the lock; uv itself is pinned and lives in its own small venv (.tools), so `uv sync`,
# which removes what the lock does not name, never removes the tool that runs it.
UV_VERSION := 0.13.9
TOOLS := .tools
UV := $(TOOLS)/bin/uv
# A Python is never downloaded: the lock is installed into an interpreter this machine has.
export UV_PYTHON_DOWNLOADS := never

# Python writes the bytecode of each module it imports, even where the shell says not to (a
# container's PYTHONDONTWRITEBYTECODE=1): uv installs no .pyc, so without this every process the
# suite starts (some 300 workers, the CLIs) compiled celery, pydantic and redis-py afresh, a third
# of each worker's start. Written once, into .venv and the gitignored __pycache__ folders.
unexport PYTHONDONTWRITEBYTECODE

define find_python
py=""; \
for c in $(PY_CANDIDATES); do \
	if $$c -c '$(PY_OK)' >/dev/null 2>&1; then py=$$c; break; fi; \
done; \
if [ -z "$$py" ]; then echo "error: Python >= 3.11 is required (none of: $(PY_CANDIDATES))" >&2; exit 1; fi
endef

$(UV):
	@$(find_python); \
	echo "installing uv $(UV_VERSION) into $(TOOLS) with $$py"; \
	rm -rf $(TOOLS) && $$py -m venv $(TOOLS) && $(TOOLS)/bin/python -m pip install -q "uv==$(UV_VERSION)"

# --locked: a pyproject.toml that no longer matches uv.lock fails here ("run make lock") instead of
# testing one set and shipping another. Every extra (dev, ai, s3) is part of the tested set.
$(STAMP): pyproject.toml uv.lock | $(UV)
	@$(find_python); \
	if ! $(BIN)/python -c '$(PY_OK)' >/dev/null 2>&1; then rm -rf $(VENV); fi; \
	$(UV) sync --locked --all-extras --python "$$($$py -c 'import sys; print(sys.executable)')"
	@touch $@

lock: $(UV) ## Refresh uv.lock to the newest allowed releases (run `make test-latest` first)
	$(UV) lock --upgrade

# The canary: the newest releases pyproject.toml allows, resolved afresh into a scratch venv
# (.venv-latest), linted and tested there. The lock and .venv are left as they are.
LATEST := .venv-latest
# tests/test_lock.py stands aside: this run is on the newest releases, not the lock, on purpose.
# Not a REFLEXR_* name: every process of the suite refuses a REFLEXR_* variable that is not a setting.
test-latest: export TEST_LATEST := 1
test-latest: $(UV) redis rabbitmq sentinel browser tmux faketime ## Lint and test on the newest allowed releases, in a scratch venv (not the lock)
	@$(find_python); \
	rm -rf $(LATEST) && $(UV) venv -q --python "$$py" $(LATEST) && \
	VIRTUAL_ENV=$(LATEST) $(UV) pip install -q --upgrade -e '.[dev,ai,s3]'
	$(UV) pip list --python $(LATEST)/bin/python | grep -iE '^(pydantic-graph|pydantic-ai-slim|redis|celery|kombu|fastapi|mypy|ruff) '
	$(LATEST)/bin/ruff check .
	$(LATEST)/bin/ruff format --check .
	$(LATEST)/bin/mypy
	$(call run_pytest_with,$(LATEST)/bin/pytest,$(XDIST))

redis: ## Make sure redis-server is installed (tests start their own instances)
	@bash scripts/ensure-redis.sh

rabbitmq: ## Make sure rabbitmq-server is installed (the RabbitMQ broker tests start their own node)
	@bash scripts/ensure-rabbitmq.sh

sentinel: ## Make sure redis-sentinel is installed (the failover tests start their own)
	@bash scripts/ensure-sentinel.sh

browser: ## Make sure Debian's chromium and chromium-driver are installed (the console's browser tests)
	@bash scripts/ensure-chromium.sh

faketime: ## Make sure faketime (libfaketime) is installed (the clock-skew tests run a worker under it)
	@bash scripts/ensure-faketime.sh

tmux: ## Make sure tmux is installed (the tests of `reflexr-graph top` run it in a real terminal)
	@bash scripts/ensure-tmux.sh

LINT := $(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/mypy

lint: install ## ruff check, ruff format --check, mypy (strict)
	$(LINT)

fmt: install ## Format and autofix with ruff
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# pytest exits 5 when it collects nothing; that must fail rather than look green.
define run_pytest_with
	@rc=0; $(1) $(2) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "error: no tests collected" >&2; exit 1; fi; \
	exit $$rc
endef
run_pytest = $(call run_pytest_with,$(PYTEST),$(1))

# Four xdist workers on two cores (most of the suite waits on its workers' timers and leases, so
# more workers than cores keep both busy), each with its own session Redis (tests/conftest.py);
# the tests that share a costly session fixture (a RabbitMQ node, a browser) are grouped onto one worker (xdist_group).
XDIST := -n $(or $(TEST_WORKERS),4) --dist loadgroup

# Lint runs beside the tests rather than before them (its quarter-minute counts against a suite held
# to ten minutes); its output follows theirs, and either failing fails make test.
test: install redis rabbitmq sentinel browser tmux faketime ## Lint and the full test suite with coverage, side by side (TEST_WORKERS=4)
	@mkdir -p .run; echo "lint runs beside the tests; its output follows theirs"; \
	( $(LINT) ) > .run/lint.log 2>&1 & lint=$$!; \
	rc=0; $(PYTEST) $(XDIST) --cov --cov-branch --cov-report=term --durations=15 || rc=$$?; \
	lrc=0; wait $$lint || lrc=$$?; cat .run/lint.log; \
	if [ $$lrc -ne 0 ]; then echo "error: lint failed (above)" >&2; exit 1; fi; \
	if [ $$rc -eq 5 ]; then echo "error: no tests collected" >&2; exit 1; fi; \
	exit $$rc

test-fast: install redis rabbitmq sentinel browser tmux faketime ## Tests without the slow crash/chaos ones, no lint
	$(call run_pytest,$(XDIST) -m "not slow")

test-cluster: install redis ## The store on a private 3-primary Redis Cluster (tests/cluster)
	$(call run_pytest,tests/cluster)

run: install redis ## The showcase: private Redis, two workers, a crash, a dead letter and a replay
	$(BIN)/reflexr-graph demo

serve: install redis ## The showcase, then its console at http://127.0.0.1:8080/ until Ctrl-C
	$(BIN)/reflexr-graph demo --serve

bench: install redis ## Run every benchmark and regenerate docs/benchmarks.md
	$(BIN)/python -m bench

clean: ## Remove .venv, .venv-latest, .tools, .run and caches
	rm -rf $(VENV) $(LATEST) $(TOOLS) .run .pytest_cache .mypy_cache .ruff_cache htmlcov dist build .coverage .coverage.*
	find . -name __pycache__ -type d -prune -not -path './.git/*' -exec rm -rf {} +
	find . -maxdepth 1 -name '*.egg-info' -exec rm -rf {} +

FORCE:
