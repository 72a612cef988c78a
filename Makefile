SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := test

VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# Each service is probed with its own client; where the client is not installed, an open
# TCP port counts as up, so machines that run the services elsewhere need no client tools.
PG_UP := if command -v pg_isready >/dev/null; then pg_isready -q -h 127.0.0.1; \
	else (: </dev/tcp/127.0.0.1/5432) 2>/dev/null; fi
REDIS_UP := if command -v redis-cli >/dev/null; \
	then [ "$$(redis-cli -h 127.0.0.1 ping 2>/dev/null)" = PONG ]; \
	else (: </dev/tcp/127.0.0.1/6379) 2>/dev/null; fi
PG_START := pg_ctlcluster --skip-systemctl-redirect $$(ls /etc/postgresql) main start
REDIS_START := redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" \
	--appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log
SERVICE_WAIT := 30

# $(call ensure_service,name,probe,start): start only when down, then wait for an answer.
ensure_service = if ! { $(2); }; then \
	echo "starting $(1)"; \
	$(3); \
	for _ in $$(seq $(SERVICE_WAIT)); do { $(2); } && break; sleep 1; done; \
	{ $(2); } || { echo "$(1) did not answer on 127.0.0.1 within $(SERVICE_WAIT)s" >&2; exit 1; }; \
	fi

.PHONY: venv demo serve services browser promtool lint test test-fast bench bench-quick \
	bench-baseline soak clean

venv: $(STAMP)

# The stamp makes repeat runs skip pip until pyproject.toml changes.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || python3 -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --no-input -e '.[dev]'
	touch $@

# Options for `manage.py demo`, e.g. make demo ARGS=--reset-passwords
ARGS ?=

# The demo is a development machine (OANP_DEVELOPMENT): it runs on the development secrets,
# with DEBUG off so that its visitors meet the site's own error pages.
demo: venv
	OANP_DEVELOPMENT=1 $(BIN)/python manage.py demo $(ARGS)

# The Procfile's processes in the foreground, on the DATABASE_URL, REDIS_URL and secrets of the
# environment (see README, Production), migrated first; one that exits is started again (and
# /readyz says so); Ctrl-C stops them all.
serve: venv
	$(BIN)/python manage.py migrate --no-input
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m oanp_site.procfile

services:
	@$(call ensure_service,PostgreSQL,$(PG_UP),$(PG_START))
	@$(call ensure_service,Redis,$(REDIS_UP),$(REDIS_START))

# The dashboard's tests drive Debian's Chromium; install it when it is missing.
browser:
	@command -v chromium >/dev/null || { echo "installing chromium"; \
		apt-get install -y -q chromium >/dev/null || \
		{ apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }; }

# The alert rules' tests (tests/test_alerts.py) run promtool. When it is missing, it is taken
# from Debian's prometheus package into the venv: unpacked, not installed, so no Prometheus
# server is set up or started on the machine.
promtool: venv
	@command -v promtool >/dev/null || test -x $(BIN)/promtool || { echo "installing promtool"; \
		deb=$$(mktemp -d); \
		( cd "$$deb" && { apt-get download -q prometheus >/dev/null 2>&1 || \
			{ apt-get update -q >/dev/null && apt-get download -q prometheus >/dev/null 2>&1; }; } \
		&& dpkg-deb -x prometheus_*.deb . ) && mv "$$deb/usr/bin/promtool" $(BIN)/promtool; \
		rm -rf "$$deb"; test -x $(BIN)/promtool; }

lint: venv
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# The suite runs on the real services; a machine may point elsewhere by setting these. Run on
# every core, as test and test-fast run it, each of its processes has a test database of its own
# on that server, and a redis-server of its own on this machine in place of TEST_REDIS_URL's
# (tests/conftest.py): on one Redis, one process's Celery worker would take another's tasks and
# run them on the wrong database.
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/oanp
TEST_REDIS_URL ?= redis://127.0.0.1:6379/15

# The suite runs with DEBUG off, as production does, so it brings secrets of its own: the
# development ones stop every start then (oanp_site.checks). Known to all, for tests only.
TEST_SECRETS := DJANGO_SECRET_KEY=test-only-5be754a2a0155b915b0feccd2bfd624480351e9a55dd9f4b947def0a052a5c8d \
	OANP_KEY_ENCRYPTION_KEY=ZZ_NqCRRo7RiReBf_QY0lAcivtOvPBW5ujyvM8LAkII= OANP_VAULT_KEY=4x1YVe4OJAGv1gzJm_WmIjgytDmMTAT3j57v4IJoj_M=

# The suite's metrics folder starts empty, so no earlier run's counters are added to its own:
# /metrics adds up the files of processes that have exited too. Each process of a run on every
# core counts in a folder of its own within it.
TEST_METRICS_DIR := $(CURDIR)/var/metrics-test

TEST_ENV := DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) \
	PROMETHEUS_MULTIPROC_DIR=$(TEST_METRICS_DIR) $(TEST_SECRETS)

# Everything, with Hypothesis's large profile (tests/conftest.py), then bench-quick: after the
# suite, so that a failing test is told first and the ratios are measured once the suite's
# servers, workers and browser have stopped. The suite runs on every core, each test module on
# one process (loadfile), in two parts: first the tests that start nothing of their own and
# keep the cores busy, then the live and browser ones, which mostly wait on their servers,
# workers, timers and Chromium, so that none of their deadlines runs beside the first part's
# search for examples. Each part starts with an empty metrics folder.
test: venv services browser promtool lint
	rm -rf $(TEST_METRICS_DIR) && mkdir -p $(TEST_METRICS_DIR)
	$(TEST_ENV) HYPOTHESIS_PROFILE=ci $(BIN)/pytest -q -m "not live and not browser" \
		-n auto --dist loadfile
	rm -rf $(TEST_METRICS_DIR) && mkdir -p $(TEST_METRICS_DIR)
	$(TEST_ENV) HYPOTHESIS_PROFILE=ci $(BIN)/pytest -q -m "live or browser" -n auto --dist loadfile
	$(MAKE) --no-print-directory bench-quick

# The edit-and-test loop: the tests that start no server, worker, program or browser of their
# own (tests/conftest.py marks the others live or browser), with Hypothesis's small profile,
# on every core: each test module stays on one process (loadfile), so a module's tests that
# read a process-wide figure (/metrics) see only their own.
test-fast: venv services promtool
	rm -rf $(TEST_METRICS_DIR) && mkdir -p $(TEST_METRICS_DIR)
	$(TEST_ENV) $(BIN)/pytest -q -m "not live and not browser" -n auto --dist loadfile

bench: venv
	$(TEST_SECRETS) $(BIN)/python -m bench

# The ratios the sections guard (bench/baseline.py), measured on small sizes and held to
# bench/quick-baseline.json: fails naming each one over its tolerance. Figures go to
# var/bench-quick/, never to bench/results.json or docs/BENCHMARKS.md.
bench-quick: venv
	$(TEST_SECRETS) $(BIN)/python -m bench --check

# Writes bench/quick-baseline.json from five quick runs; run it when a change makes a path faster
# or slower on purpose, and commit the file with that change.
bench-baseline: venv
	$(TEST_SECRETS) $(BIN)/python -m bench --write-baseline

# Faults a deployment meets, played for minutes on the Procfile's processes (a Redis of its own
# killed under load, a slow merchant, a crowd of deadlines) and idle event streams.
soak: venv
	$(TEST_SECRETS) $(BIN)/python -m bench --soak

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache .hypothesis *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
