# One runner for every check: people, pre-commit and CI use these targets.
.DEFAULT_GOAL := help
SHELL := /bin/bash

PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
SETUP_STAMP := $(VENV)/.setup-done
INBOX := $(CURDIR)/data/inbox
SAMPLE_EVENTS ?= 2000
TARGET ?= session
OVERLAP_RUNS ?= 5

export DBT_PROFILES_DIR := $(CURDIR)/profiles
export DBT_PROJECT_DIR := $(CURDIR)
# dbt with the local server's Spark Connect token (new at every thrift-up) in its
# environment, unless the caller set one; empty when no server runs (session target).
DBT := SPARK_CONNECT_AUTHENTICATE_TOKEN="$${SPARK_CONNECT_AUTHENTICATE_TOKEN:-$$($(BIN)/python \
	-m dynamic_ddl.server token 2>/dev/null)}" $(BIN)/dbt

.PHONY: help setup data topics run build docs test fuzz soak lint lint-sql bench thrift-up thrift-down thrift-status cluster-up cluster-down docs-serve clean

help: ## List the targets
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-14s %s\n", $$1, $$2}'

$(SETUP_STAMP): pyproject.toml constraints.txt scripts/setup.sh
	@PYTHON=$(PYTHON) scripts/setup.sh

# Chromium + chromedriver for the docs-site test (apt when root), checked once.
BROWSER_STAMP := $(VENV)/.browser-done
$(BROWSER_STAMP): scripts/setup.sh | $(SETUP_STAMP)
	@scripts/setup.sh browser
	@touch $@

setup: $(SETUP_STAMP) ## Check Java 17+, create .venv, install pinned packages (skipped when done)

# Checked at every run, not stamped: sample rows are never written beside files a user
# put in the inbox (they would be ingested for good), and a cleared inbox gets them again.
data: setup ## Generate sample JSON into data/inbox when it holds no file
	@$(BIN)/python -m dynamic_ddl.sampledata --out $(INBOX) --events $(SAMPLE_EVENTS) --batch 1 --if-empty

topics: setup ## Write python_models/raw/raw_<topic>.py for every topic of vars.raw_topics
	@$(BIN)/python -m dynamic_ddl.ingest topics

run: setup data topics ## The main job: dbt build on the embedded target, docs, and a summary
	@$(BIN)/python -m dynamic_ddl.ingest check
	$(DBT) build --target $(TARGET) --vars '{print_summary: true}'
	$(DBT) docs generate --static --target $(TARGET) --vars '{print_summary: true}' --quiet
	@echo "Docs: file://$(CURDIR)/target/static_index.html"

build: setup topics ## dbt build only (TARGET=session|thrift)
	$(DBT) build --target $(TARGET)

docs: setup ## Generate the static dbt docs site into target/
	$(DBT) docs generate --static --target $(TARGET)

DOCS_PORT ?= 8080
docs-serve: docs ## Serve the docs site on http://127.0.0.1:$(DOCS_PORT) (Ctrl-C stops it)
	@echo "Docs: http://127.0.0.1:$(DOCS_PORT)/static_index.html"
	$(BIN)/python -m http.server $(DOCS_PORT) --bind 127.0.0.1 --directory target

test: setup $(BROWSER_STAMP) lint ## The full test suite (lint, then pytest on a real Spark and Chromium)
	$(BIN)/pytest

FUZZ_EXAMPLES ?= 300
fuzz: setup ## Property tests on many new random inputs (FUZZ_EXAMPLES=300: about an hour and a half)
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) FUZZ_RANDOM=1 $(BIN)/pytest -p no:cacheprovider \
		tests/test_fuzz_ingest.py tests/adapter/test_pivot_fuzz.py tests/test_upsert_properties.py

soak: setup ## Two whole dbt builds at once on one Thrift server, OVERLAP_RUNS=5 times
	OVERLAP_RUNS=$(OVERLAP_RUNS) OVERLAP_SEED=$$RANDOM $(BIN)/pytest -p no:cacheprovider \
		tests/test_project.py -k two_builds_at_once

# Every SQL file we write: models, macros, data tests, the adapter's materializations.
SQL_PATHS := models macros snapshots tests/data_tests plugins/dynamic_ddl/adapter/dynamic_spark/macros
SQLFLUFF_FLAGS ?=
# --processes 0: one linter process per core (files lint independently).
lint-sql: setup ## sqlfluff only; CI adds SQLFLUFF_FLAGS="--format github-annotation-native"
	$(BIN)/sqlfluff lint --processes 0 $(SQL_PATHS) $(SQLFLUFF_FLAGS)

lint: lint-sql ## sqlfluff on every SQL file, ruff on Python, raw models match their topics
	$(BIN)/python -m dynamic_ddl.ingest topics --check
	$(BIN)/ruff check plugins python_models tests bench lint
	$(BIN)/ruff format --check plugins python_models tests bench lint

thrift-up: setup ## Start the local Thrift (10000) + Spark Connect (15002) server; env SPARK_PORT, SPARK_MASTER
	$(BIN)/python -m dynamic_ddl.server up

thrift-down: ## Stop the local Thrift + Spark Connect server (only the recorded pid)
	$(BIN)/python -m dynamic_ddl.server down

thrift-status: ## Is the local Thrift + Spark Connect server running? (exit 3 if not)
	$(BIN)/python -m dynamic_ddl.server status

cluster-up: setup ## Start a Spark standalone master (7077) and 2 workers; then SPARK_MASTER=spark://127.0.0.1:7077 make thrift-up
	$(BIN)/python -m dynamic_ddl.server.standalone up

cluster-down: ## Stop the standalone master and workers (only the recorded pids)
	$(BIN)/python -m dynamic_ddl.server.standalone down

bench: setup ## Benchmarks: print the figures and write docs/benchmarks.md
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev,bench]'
	$(BIN)/python bench/run.py

# The servers first: their pid files are in .local, and a server left running on a
# removed metastore could then be stopped by no target (its port stays taken).
clean: ## Stop the local servers, remove dbt output and local Spark state (.local); keeps .venv and data
	@if [ -x $(BIN)/python ]; then \
		$(BIN)/python -m dynamic_ddl.server down || true; \
		$(BIN)/python -m dynamic_ddl.server.standalone down || true; fi
	rm -rf target logs .local
