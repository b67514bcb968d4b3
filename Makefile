# slidewin: `make help` lists the targets.
SHELL := /bin/bash
PORT ?= 6379
# Where cargo builds: TARGET_DIR, else CARGO_TARGET_DIR or cargo's own
# configuration (build.target-dir), as `cargo metadata` reports it, else
# ./target. Exported as an absolute CARGO_TARGET_DIR, so that cargo, the
# tests (tests/support, clients/python/tests), the scripts and the
# benchmark all use the same folder.
ifeq ($(origin TARGET_DIR),undefined)
TARGET_DIR := $(shell cargo metadata --no-deps --format-version 1 2>/dev/null | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
endif
TARGET_DIR := $(abspath $(or $(TARGET_DIR),target))
export CARGO_TARGET_DIR := $(TARGET_DIR)
MODULE := $(TARGET_DIR)/release/libslidewin.so
# The release (Cargo.toml's version) and where make dist puts it.
VERSION := $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' Cargo.toml | head -1)
DIST_DIR ?= $(TARGET_DIR)/dist
MODULE_ARGS ?=
REDIS_SERVER ?= redis-server
# make run SERVER=redis-8.2 runs one of the suite's servers (scripts/server-path.sh).
SERVER ?=
IMAGE ?= slidewin:latest
REDIS_IMAGE ?= redis:7.2-bookworm
RUST_IMAGE ?= rust:1-bookworm
# The servers make test-docker builds stand-in images from and runs the
# container suite on (names as in scripts/server-path.sh).
DOCKER_SERVERS ?= redis-7.0 redis-8.2 valkey-8.1 valkey-9.1
# The log types and servers make test-limits runs limits' suite on (CI
# runs it on two servers, the oldest and the newest: see .ci/run).
LIMITS_LOG_TYPES ?= zset compact
LIMITS_SERVERS ?= redis-7.0 redis-8.2 valkey-8.1 valkey-9.1
# The servers make bench runs on.
BENCH_SERVERS ?= redis-7.0 redis-8.2 valkey-8.1 valkey-9.1
# The project's virtual environment (made by scripts/deps.sh): the server
# wheels, redis-py, pytest and the client under test live there, never in the
# interpreter you run. Exported so that the tests and scripts use it too.
VENV ?= $(CURDIR)/.venv
PYTHON := $(VENV)/bin/python
export VENV PYTHON
# The profile the tests build with (Cargo.toml's [profile.itest]: release's
# optimisation without its link-time optimisation). The module under test
# is always the release build (make build).
TEST_PROFILE ?= itest
# How many test programs of the integration suite run at once
# (scripts/run-suite.sh); each runs its tests on two threads.
SUITE_JOBS_AT_ONCE ?= 2
# The classic builder: this project's machines have no buildx.
DOCKER_BUILD := DOCKER_BUILDKIT=0 docker build

.PHONY: ci help help-check deps deps-build build dist test-deb test-fresh fault-module python-client test test-python test-limits fuzz fuzz-cov fuzz-smoke unit itest quick lint fmt run bench bench-eviction bench-small-keys bench-smoke cluster cluster-stop docker docker-run test-docker clean

##@ Build and run

help: ## List the targets, by section
	@awk '/^##@ / { printf "\n%s\n", substr($$0, 5); next } \
		/^[a-z-]+:.*## / { split($$0, a, ":.*## "); printf "  make %-17s %s\n", a[1], a[2] }' $(MAKEFILE_LIST)
	@echo
	@echo "  variables: PORT=$(PORT) (make run), MODULE_ARGS=..., SERVER=redis-7.0|redis-8.2|valkey-8.1|valkey-9.1, REDIS_SERVER=redis-server, DOCKER_SERVERS=\"$(DOCKER_SERVERS)\", TARGET_DIR=$(TARGET_DIR)"

deps: ## Install what the tests, benchmark and examples need (make test runs it): system packages by apt, Python packages into .venv/ (never your own Python); prints what it found
	@scripts/deps.sh test

deps-build: ## Install only what building needs (libclang; cargo you bring)
	@scripts/deps.sh build

build: deps-build ## Build the module, TARGET_DIR/release/libslidewin.so (installs only what building needs)
	cargo build --release
	@# Up to date by cargo's account: dated now, so that the tests' check
	@# (a module older than a source is refused) agrees after an edit cargo
	@# needed no rebuild for (a comment, a new profile in Cargo.toml).
	@touch $(MODULE)
	@echo "built $(MODULE)"

fault-module: deps-build ## Build the test-only fault-injection module (TARGET_DIR/fault-injection/libslidewin.so)
	cargo build --profile fault-injection --features fault-injection

python-client: deps ## Install the Python client (clients/python) into .venv/ as a user does: pip install ./clients/python
	$(PYTHON) -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps ./clients/python

run: build ## Run a server with the module on localhost:PORT (foreground; SERVER=redis-8.2|valkey-8.1|valkey-9.1 or REDIS_SERVER=path); installs only that server
	@SERVER="$(SERVER)" REDIS_SERVER="$(REDIS_SERVER)" scripts/deps.sh run
	@server="$(REDIS_SERVER)"; if [ -n "$(SERVER)" ]; then server=$$(scripts/server-path.sh $(SERVER)) || exit 1; fi; \
	echo "$$server on 127.0.0.1:$(PORT) with $(MODULE); try: redis-cli -p $(PORT) SLIDEWIN.CHECK sms:limit:1.2.3.4 5 60000"; \
	exec $$server --port $(PORT) --bind 127.0.0.1 --save "" --appendonly no \
		--loadmodule $(MODULE) $(MODULE_ARGS)

cluster: build ## Start a local Redis Cluster (3 masters + 3 replicas, ports 30001-30006) with the module
	@scripts/deps.sh run
	@MODULE=$(MODULE) scripts/cluster.sh start

cluster-stop: ## Stop the cluster started by make cluster
	@scripts/cluster.sh stop

docker: ## Build the image (IMAGE, REDIS_IMAGE, RUST_IMAGE; pulls the base images)
	$(DOCKER_BUILD) -f docker/Dockerfile --build-arg REDIS_IMAGE=$(REDIS_IMAGE) \
		--build-arg RUST_IMAGE=$(RUST_IMAGE) -t $(IMAGE) .

docker-run: ## Run the image on 127.0.0.1:PORT
	docker run --rm -p 127.0.0.1:$(PORT):6379 $(IMAGE)

# make help-check (run by make lint): every target has a `## ` line and sits
# under a `##@ ` section, and every name in .PHONY is a target.
help-check: ## Check that make help lists every target under a section
	@awk 'BEGIN { bad = 0 } \
		/^##@ / { section = 1; next } \
		/^\.PHONY:/ { for (i = 2; i <= NF; i++) phony[$$i] = 1; next } \
		/^[a-z][a-z-]*:/ && !/^[a-z-]+ *[:?+]?=/ { t = $$0; sub(/:.*/, "", t); defined[t] = 1; \
			if ($$0 !~ /## /) { print "make help-check: target " t " has no ## line"; bad = 1 } \
			if (!section) { print "make help-check: target " t " is under no ##@ section"; bad = 1 } } \
		END { for (p in phony) if (!(p in defined)) { print "make help-check: .PHONY names " p ", which is no target"; bad = 1 } \
			if (bad) exit 1; n = 0; for (t in defined) n++; print "make help-check: " n " targets, each in a section" }' $(MAKEFILE_LIST)

fmt: ## Format the code
	cargo fmt

lint: help-check imports ## cargo fmt --check and clippy with warnings as errors (the fuzz targets too), make help-check, make imports
	cargo fmt --check
	cargo fmt --check --manifest-path fuzz/Cargo.toml
	cargo clippy --all-targets -- -D warnings
	CARGO_TARGET_DIR=$(TARGET_DIR)/fuzz cargo clippy --manifest-path fuzz/Cargo.toml --all-targets -- -D warnings

.PHONY: imports
imports: ## The module graph of src/ (scripts/import-graph.py): fails on an import circle or an import of an ancestor module's items
	python3 scripts/import-graph.py

clean: ## Remove build output
	cargo clean

##@ Test

ci: ## What CI runs (.ci/run): install, fmt and clippy, make test (limits' suite on two servers), fuzz-smoke, test-deb, bench-smoke, test-docker; about 34 minutes on 2 cores
	.ci/run

test: deps build fault-module python-client ## Unit tests, the integration suite (examples included), the Python client's tests and limits' own suite on the slidewin storage, on Redis 7.0 and 8.2, Valkey 8.1 and 9.1
	cargo test --profile $(TEST_PROFILE) --lib
	scripts/run-suite.sh $(TEST_PROFILE) $(SUITE_JOBS_AT_ONCE)
	$(MAKE) --output-sync=target -j2 test-python test-limits

unit: ## Unit and property tests only (no server needed)
	cargo test --profile $(TEST_PROFILE) --lib

# make itest T=<suite>[::<server>[::<test>]]: one test program of tests/
# (the suite: tests/<suite>.rs, or tests/<suite>/main.rs and the files it
# declares), and of it the tests whose name holds the rest (cargo's filter).
T ?=
# More of cargo test's harness options, after the filter (--exact, --nocapture).
TEST_ARGS ?=
itest: build ## One integration test by name: T=check::redis_7_0::window_slides (T=check::redis_7_0:: one server's tests of a suite, T=check the suite; TEST_ARGS=--exact ...)
	@[ -n "$(T)" ] || { echo "usage: make itest T=<suite>[::<server>[::<test>]] (suite: tests/<suite>.rs or tests/<suite>/main.rs, e.g. T=check::redis_7_0::window_slides)" >&2; exit 2; }
	@t='$(T)'; suite=$${t%%::*}; filter=$${t#"$$suite"}; filter=$${filter#::}; \
	[ -f "tests/$$suite.rs" ] || [ -f "tests/$$suite/main.rs" ] || { echo "itest: no suite tests/$$suite.rs or tests/$$suite/main.rs" >&2; exit 2; }; \
	case $$suite in panics) $(MAKE) --no-print-directory fault-module ;; cluster | examples) $(MAKE) --no-print-directory python-client ;; esac || exit 1; \
	echo "cargo test --profile $(TEST_PROFILE) --test $$suite -- $$filter $(TEST_ARGS)"; \
	cargo test --profile $(TEST_PROFILE) --test "$$suite" -- $$filter $(TEST_ARGS)

# The server make quick runs the integration suites on.
QUICK_SERVER ?= redis-7.0
quick: build fault-module python-client ## Unit tests, then every integration suite on one server (QUICK_SERVER=redis-7.0; redis-8.2, valkey-8.1, valkey-9.1)
	cargo test --profile $(TEST_PROFILE) --lib
	cargo test --profile $(TEST_PROFILE) --test '*' -- $$(echo $(QUICK_SERVER) | tr '.-' '__')::

test-python: build python-client ## The Python client's tests (pytest) against the four servers
	cd / && $(PYTHON) -m pytest -q -p no:cacheprovider $(CURDIR)/clients/python/tests

.PHONY: test-integrations
test-integrations: build python-client ## The integrations' tests (integrations/: nginx + Lua, Prometheus, Symfony, rack-attack) on Redis 7.0 and Valkey 9.1 (INTEGRATION_SERVERS=...); installs their packages (scripts/deps.sh integrations)
	@scripts/deps.sh integrations >/dev/null
	cd / && $(PYTHON) -m pytest -q -p no:cacheprovider $(CURDIR)/integrations

test-limits: build python-client ## The limits library's own storage, strategy and concurrency tests (its sdist, unmodified) on the slidewin storages, four servers (LIMITS_LOG_TYPES=zset or compact, LIMITS_SERVERS=...: fewer)
	SLIDEWIN_LIMITS_LOG_TYPES="$(LIMITS_LOG_TYPES)" SLIDEWIN_LIMITS_SERVERS="$(LIMITS_SERVERS)" scripts/limits-suite.sh

test-docker: deps dist ## For each of DOCKER_SERVERS: a stand-in image (no registry), docker/Dockerfile on it with the module of make dist's tarball, the suite against containers
	docker-compose -f docker/compose.yaml --profile cluster config -q
	scripts/docker-context-check.sh
	mkdir -p docker/prebuilt
	tar -xzf $(DIST_DIR)/slidewin-$(VERSION)-linux-$$(uname -m).tar.gz -O \
		slidewin-$(VERSION)-linux-$$(uname -m)/libslidewin.so >docker/prebuilt/libslidewin.so
	chmod 0755 docker/prebuilt/libslidewin.so
	set -e; for s in $(DOCKER_SERVERS); do \
		mod=$$(echo $$s | tr '.-' '__'); \
		scripts/docker-standin.sh slidewin-standin:$$s $$s; \
		$(DOCKER_BUILD) -q -f docker/Dockerfile --build-arg REDIS_IMAGE=slidewin-standin:$$s \
			--build-arg RUST_IMAGE=slidewin-standin:$$s --build-arg PREBUILT=1 -t slidewin:test-$$s . >/dev/null; \
		scripts/docker-smoke.sh slidewin:test-$$s docker/prebuilt/libslidewin.so; \
		SLIDEWIN_TEST_BACKEND=docker SLIDEWIN_DOCKER_IMAGE=slidewin:test-$$s SLIDEWIN_DOCKER_SERVER=$$s \
			scripts/run-suite.sh $(TEST_PROFILE) $(SUITE_JOBS_AT_ONCE) check surface faults history \
			multi fuzz parity examples top -- $$mod::; \
	done

test-fresh: ## make build and make run on a fresh Debian 12 container (root, Docker; 5-15 minutes): no test tool may be installed (scripts/fresh-machine.sh)
	scripts/fresh-machine.sh

# The partition harness (tests/partitions/; needs root: network namespaces,
# veth, iptables): a 3+3 cluster of namespaced hosts, one master cut off until
# it is failed over, then healed; PARTITION_RUNS runs of each configuration
# (async, min-replicas-to-write, WAIT) on each of PARTITION_SERVERS. The
# tables go to target/partitions/<server>.md (docs/operating.md, "Failover: what a decision is worth", holds them).
# make test runs the short version (2 runs of each on Redis 7.0).
PARTITION_SERVERS ?= redis-7.0 redis-8.2 valkey-8.1 valkey-9.1
PARTITION_RUNS ?= 20
.PHONY: test-partitions
test-partitions: deps build ## Partitions on real (namespaced) hosts: lost decisions and over-admission per configuration, PARTITION_RUNS (20) runs on each of PARTITION_SERVERS (root)
	SLIDEWIN_PARTITION_RUNS=$(PARTITION_RUNS) SLIDEWIN_PARTITION_SERVERS="$(PARTITION_SERVERS)" \
		cargo test --profile $(TEST_PROFILE) --test partitions -- --ignored --nocapture full

# The servers' own test suites (make test-server): whose suites, in which
# modes (none: without the module; zset; compact: log-type compact).
SUITE_SERVERS ?= redis-7.0 valkey-9.1 valkey-8.1
SUITE_MODES ?= none zset compact
.PHONY: test-server
test-server: build ## The servers' own replication tests (Debian's sources: Redis 7.0, Valkey 9.1, 8.1) without the module and with it in each log type; fails on a failure the server alone does not have; about half an hour a server, not in make test (SUITE_SERVERS, SUITE_MODES, SUITE_UNITS, SUITE_JOBS)
	@status=0; for s in $(SUITE_SERVERS); do \
		SUITE_SERVER=$$s MODULE=$(MODULE) scripts/server-suites.sh $(SUITE_MODES) || status=1; \
	done; exit $$status

fuzz: ## The compact log's decoder (random and mutated encodings) and the effect command's parser, a million inputs each (make test runs 400 of each), then make fuzz-cov
	SLIDEWIN_FUZZ_CASES=1000000 cargo test --profile $(TEST_PROFILE) --lib -- compact::tests::hostile compact::tests::mutated compact::tests::effects
	$(MAKE) fuzz-cov

# Seconds each coverage-guided fuzz target runs in make fuzz-cov.
FUZZ_SECONDS ?= 600
fuzz-cov: ## Coverage-guided fuzzing (cargo-fuzz, libFuzzer; fuzz/): the decoder, SLIDEWIN.APPLY, the argument parsers, FUZZ_SECONDS (600) each; installs cargo-fuzz
	scripts/fuzz.sh $(FUZZ_SECONDS)

fuzz-smoke: ## The fuzz targets of make fuzz-cov for 25 s each (CI runs it; about 3 minutes with the build)
	scripts/fuzz.sh 25

##@ Bench

# redis-cell's module for the CL.THROTTLE rows of make bench, built from
# crates.io by scripts/redis-cell.sh (once); CELL= leaves them out.
CELL ?= $(shell scripts/redis-cell.sh)

bench: deps build ## Benchmark CHECK (sorted sets, then compact logs) against the floor, the Lua script and CL.THROTTLE (redis-cell from crates.io; CELL=path or CELL= for none) on every server, and count instructions per call; writes bench/results-<server>[-compact].md, bench/instructions.md
	@for server in $(BENCH_SERVERS); do \
		$(PYTHON) bench/bench.py --server $$server --out bench/results-$$server.md $(if $(CELL),--cell $(CELL)) $(BENCH_ARGS) || exit 1; \
		$(PYTHON) bench/bench.py --server $$server --log-type compact --out bench/results-$$server-compact.md $(if $(CELL),--cell $(CELL)) $(BENCH_ARGS) || exit 1; \
	done
	@rm -f bench/results-hostile-logs.md
	@for server in $(BENCH_SERVERS); do \
		$(PYTHON) bench/hostile_logs.py --server $$server --out bench/results-hostile-logs.md || exit 1; \
	done
	$(PYTHON) bench/adversarial.py --out bench/results-adversarial.md
	@rm -f bench/instructions.md
	@for server in $(BENCH_SERVERS); do for log in zset compact; do \
		$(PYTHON) bench/instructions.py --server $$server --log-type $$log --out bench/instructions.md $(if $(CELL),--cell $(CELL)) $(INSTR_ARGS) || exit 1; \
	done; done

bench-smoke: deps build ## A short run of the benchmark (checks it works and stops its server; numbers are not meaningful)
	$(PYTHON) bench/bench.py --scale 0.02 --rounds 1
	$(PYTHON) bench/eviction.py --smoke
	$(PYTHON) bench/limits_bench.py --smoke
	$(PYTHON) bench/small_keys.py --keys 1000 --servers redis-7.0 --apart-ms 100
	$(PYTHON) bench/instructions.py --keys 20 --full-keys 1
	$(PYTHON) bench/instructions.py --keys 20 --full-keys 1 --log-type compact
	$(PYTHON) bench/hostile_logs.py --scale 0.01
	$(PYTHON) bench/adversarial.py --smoke
	$(PYTHON) bench/charges.py --smoke
	scripts/test-bench-stops.sh

.PHONY: bench-charges
bench-charges: deps build ## Charges at scale (issue 39): 1k to 1M live charges with request ids on one key, random and ordered ids, zset and compact, master and replica, on every server; small keys with ids; a day-window token key's SETTLE raises (CHARGES_ARGS=...; about 40 minutes); writes bench/results-charges.md
	$(PYTHON) bench/charges.py --servers "$$(echo $(BENCH_SERVERS) | tr ' ' ,)" --out bench/results-charges.md $(CHARGES_ARGS)

bench-eviction: deps build ## What maxmemory eviction does to limiter keys: every policy, both log types, the four servers; writes bench/results-eviction.md
	$(PYTHON) bench/eviction.py --out bench/results-eviction.md

bench-small-keys: build ## What a limit-5 key costs the server: used_memory over 100,000 keys (five calls in one burst, 1 s apart, 20 s apart; about 25 minutes), compact against sorted sets and a fixed-window counter, the four servers; writes bench/results-small-keys.md
	$(PYTHON) bench/small_keys.py --servers "$$(echo $(BENCH_SERVERS) | tr ' ' ,)" --out bench/results-small-keys.md

.PHONY: bench-limits
bench-limits: deps build ## limits' Redis moving window against SLIDEWIN.CHECK: server µs per hit at limits 10, 1000, 70000 on every server (LIMITS_BENCH_ARGS=...); writes bench/results-limits.md
	$(PYTHON) bench/limits_bench.py --servers "$$(echo $(BENCH_SERVERS) | tr ' ' ,)" --out bench/results-limits.md $(LIMITS_BENCH_ARGS)

##@ Release

dist: build ## A release from this build: DIST_DIR/slidewin-VERSION-linux-ARCH.tar.gz (module, FUNCTION library and its EVAL form, redis.conf snippet, README, CHANGELOG, LICENSE, SHA256SUMS), the Debian package redis-slidewin_VERSION-1_ARCH.deb, SHA256SUMS
	@scripts/deps.sh dist
	scripts/dist.sh $(MODULE) $(DIST_DIR)

test-deb: dist ## The Debian package as an operator uses it (root): apt-get install, Debian's redis-server with the documented include answers CHECK, apt-get remove leaves a server that starts
	scripts/test-deb.sh $(DIST_DIR)/redis-slidewin_$(VERSION)-1_$$(dpkg --print-architecture).deb
