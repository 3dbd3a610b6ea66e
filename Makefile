# shardlog: `make up` runs it, `make test` tests it. `make help` lists every target.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV ?= .venv
# Debian's interpreter, not a user's pyenv: processes running as the postgres user use this venv.
SYSTEM_PYTHON ?= /usr/bin/python3
APT_PACKAGES := postgresql-15 postgresql-15-hll postgresql-client-15 python3-venv etcd-server haproxy patroni python3-etcd pgbadger \
	softflowd nfdump pmacct rsyslog rsyslog-elasticsearch rsyslog-relp rsyslog-gnutls bsdutils chromium chromium-driver
# Only for the container targets (image, test-compose, test-ansible-hosts).
DOCKER_PACKAGES := docker.io docker-compose debootstrap
BIN := $(VENV)/bin
# The native ingest extension (native/, Rust through PyO3): rustup's cargo where there is one,
# else Debian's cargo-web (bookworm's current Rust).
export PATH := $(HOME)/.cargo/bin:$(PATH)
NATIVE_SOURCES := native/Cargo.toml native/Cargo.lock native/pyproject.toml \
	native/shardlog_native.pyi $(wildcard native/src/*.rs)
PYTEST_ARGS ?=
# The segment codec of compacted days (native/pg_segments/, a C extension of PostgreSQL 15).
PG_CONFIG ?= /usr/lib/postgresql/15/bin/pg_config
PG_SEGMENTS_SOURCES := $(wildcard native/pg_segments/*.c native/pg_segments/*.h native/pg_segments/*.sql) \
	native/pg_segments/Makefile native/pg_segments/shardlog_segments.control

.PHONY: help install up down status clean test lint typecheck native-test pytest bench bench-report bench-docs \
	install-docker wheelhouse image test-compose test-ansible-hosts down-docker

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml constraints.txt
	@bash services/install-packages.sh $(APT_PACKAGES)
	@test -x $(BIN)/python || $(SYSTEM_PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev]'
	@touch $@

$(VENV)/.native: $(VENV)/.installed $(NATIVE_SOURCES)
	@command -v cargo >/dev/null || bash services/install-packages.sh cargo-web rustc-web
	@bash services/install-packages.sh python3-dev
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pip install -q --no-build-isolation ./native
	@touch $@

# Installed into PostgreSQL's own directories (as root, like the apt packages).
$(VENV)/.pg_segments: $(VENV)/.installed $(PG_SEGMENTS_SOURCES)
	@bash services/install-packages.sh postgresql-server-dev-15 libzstd-dev
	$(MAKE) --no-print-directory -C native/pg_segments PG_CONFIG=$(PG_CONFIG)
	$(MAKE) --no-print-directory -C native/pg_segments PG_CONFIG=$(PG_CONFIG) install
	@touch $@

install: ## install missing apt packages, the Python environment and the PostgreSQL extension (idempotent)
	@bash services/install-packages.sh $(APT_PACKAGES)
	@$(MAKE) --no-print-directory $(VENV)/.installed $(VENV)/.native $(VENV)/.pg_segments

up: install ## start 12 shards, the metadata instance, the router on 127.0.0.1:8080, the NetFlow/IPFIX collector (udp 2055, 4739) and the syslog listener (udp+tcp 5514) (HA=1: 4 Patroni shards x 2 nodes, etcd, HAProxy; TLS=1: HTTPS and PostgreSQL over verified TLS)
	$(BIN)/shardlog up $(if $(HA),--ha) $(if $(TLS),--tls)

down: ## stop everything `make up` started (data stays)
	@if [ -x $(BIN)/shardlog ]; then $(BIN)/shardlog down; else echo "nothing to stop"; fi

status: ## show what runs where
	@if [ -x $(BIN)/shardlog ]; then $(BIN)/shardlog status; else echo "not installed"; fi

clean: ## stop everything and remove the data directory
	@if [ -x $(BIN)/shardlog ]; then $(BIN)/shardlog clean; else rm -rf var; fi

lint: install ## ruff, ansible-lint (offline: ansible.builtin only)
	$(BIN)/ruff check router services tests bench docker
	$(BIN)/ruff format --check router services tests bench docker
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/ansible-lint -q -c ansible/.ansible-lint ansible

typecheck: install ## mypy (strict)
	$(BIN)/mypy

pytest: install ## the test suite against real PostgreSQL instances (ends with its 25 slowest tests; tests/ha and tests/bench run beside the rest)
	@bash services/pytest-beside.sh $(BIN)/pytest $(PYTEST_ARGS)

# With the extension-module feature, as the install built it: the release build's dependencies
# (pyo3) in native/target are reused, only the test binary is compiled.
native-test: install ## the native extension's own Rust tests (its Python side is tested in tests/)
	cd native && PYO3_PYTHON=$(SYSTEM_PYTHON) cargo test --release --quiet --features extension-module

TEST_PARTS := install lint typecheck native-test pytest
test: ## install, lint, type check and run every test; ends with the slowest tests and each part's time
	@MAKE="$(MAKE)" bash services/timed-parts.sh $(TEST_PARTS)

bench: install ## run every benchmark in bench/, then the report and docs/benchmarks.md's figures (bench/results/)
	$(BIN)/python -m bench
	$(BIN)/python -m bench.docs_page

bench-report: install ## render bench/results/index.html and docs/benchmarks.md's figures from the results (nothing re-run)
	$(BIN)/python -m bench.overview
	$(BIN)/python -m bench.docs_page

bench-docs: install ## regenerate docs/benchmarks.md's figures from bench/results/*.json (CHECK=1: only compare)
	$(BIN)/python -m bench.docs_page $(if $(CHECK),--check)

install-docker: install ## install Docker (docker.io, docker-compose) and debootstrap (idempotent)
	@bash services/install-packages.sh $(DOCKER_PACKAGES)

wheelhouse: install ## wheels of every pinned dependency under var/wheelhouse (for offline image builds)
	$(BIN)/python -m services.image wheelhouse

image: install-docker wheelhouse ## build the image offline (local Debian base when it cannot be pulled; engine under var/docker when none runs)
	$(BIN)/python -m services.image build

test-compose: install-docker ## run docker-compose.yml for real: up, ingest, search, kill a primary, down -v
	$(BIN)/pytest -m containers tests/compose

test-ansible-hosts: install-docker ## run ansible/ on this host (localhost inventory), then on 3 Debian hosts with systemd (containers): site, verify, idempotence, ingest, a host of a primary powered off
	$(BIN)/pytest -m playbooks tests/deploy/test_ansible.py
	$(BIN)/pytest -m containers tests/hosts

down-docker: ## stop the Docker engine that make image / test-compose started under var/docker
	@$(BIN)/python -c 'from pathlib import Path; from services.docker_engine import DockerEngine; print("stopped" if DockerEngine(Path("var/docker")).stop() else "no engine of ours running")'
