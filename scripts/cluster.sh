#!/usr/bin/env bash
# A local Redis Cluster with slidewin loaded on every node: 3 masters and
# 3 replicas on loopback, created with `redis-cli --cluster create`.
#
#   scripts/cluster.sh start     start the nodes and create the cluster
#   scripts/cluster.sh stop      shut every node down (SHUTDOWN NOSAVE, then kill)
#   scripts/cluster.sh status    CLUSTER NODES of the first node
#
# Environment (defaults in brackets):
#   CLUSTER_DIR   [$CARGO_TARGET_DIR/cluster]  one sub-directory per node, logs, pid files
#                 (CARGO_TARGET_DIR: cargo's build folder, ./target unless set)
#   BASE_PORT     [30001]                nodes use BASE_PORT .. BASE_PORT+5 (bus: +10000)
#   SERVER        [redis-server]         server binary (a valkey-server works too)
#   CLI           [redis-cli]            client used for --cluster create
#   MODULE        [$CARGO_TARGET_DIR/release/libslidewin.so]  "none": no module (the FUNCTION library path)
#   MODULE_ARGS   []                     e.g. "max-limit 1000"
#   NODE_TIMEOUT  [5000]                 cluster-node-timeout in ms (failover speed)
#   EXTRA_ARGS    []                     more server arguments for every node
# The tests in tests/cluster/ use this same script.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
target_dir=${CARGO_TARGET_DIR:-$here/target}
CLUSTER_DIR=${CLUSTER_DIR:-$target_dir/cluster}
BASE_PORT=${BASE_PORT:-30001}
SERVER=${SERVER:-redis-server}
CLI=${CLI:-redis-cli}
MODULE=${MODULE:-$target_dir/release/libslidewin.so}
MODULE_ARGS=${MODULE_ARGS:-}
NODE_TIMEOUT=${NODE_TIMEOUT:-5000}
EXTRA_ARGS=${EXTRA_ARGS:-}
NODES=6

ports() { for i in $(seq 0 $((NODES - 1))); do echo $((BASE_PORT + i)); done; }

wait_for() { # wait_for <seconds> <command...>: poll until the command succeeds
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then return 1; fi
    sleep 0.1
  done
}

start() {
  local load=()
  if [ "$MODULE" != none ]; then
    [ -f "$MODULE" ] || { echo "cluster: module not built at $MODULE: run make build" >&2; exit 1; }
    # shellcheck disable=SC2206
    load=(--loadmodule "$MODULE" $MODULE_ARGS)
  fi
  mkdir -p "$CLUSTER_DIR"
  for port in $(ports); do
    local dir="$CLUSTER_DIR/$port"
    rm -rf "$dir" && mkdir -p "$dir"
    # shellcheck disable=SC2086
    "$SERVER" --port "$port" --bind 127.0.0.1 --dir "$dir" --daemonize yes \
      --pidfile "$dir/server.pid" --logfile "$dir/server.log" \
      --cluster-enabled yes --cluster-config-file nodes.conf \
      --cluster-node-timeout "$NODE_TIMEOUT" --save "" --appendonly no \
      --enable-debug-command yes --enable-module-command yes \
      "${load[@]}" $EXTRA_ARGS
  done
  for port in $(ports); do
    wait_for 15 "$CLI" -p "$port" ping || {
      echo "cluster: node $port did not start:" >&2
      tail -20 "$CLUSTER_DIR/$port/server.log" >&2
      exit 1
    }
  done
  local addrs=()
  for port in $(ports); do addrs+=("127.0.0.1:$port"); done
  "$CLI" --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$CLUSTER_DIR/create.log" 2>&1 || {
    cat "$CLUSTER_DIR/create.log" >&2
    exit 1
  }
  for port in $(ports); do
    wait_for 30 sh -c "'$CLI' -p $port cluster info | grep -q 'cluster_state:ok'" || {
      echo "cluster: node $port never reached cluster_state:ok" >&2
      exit 1
    }
  done
  # Every replica must have synced before the cluster is handed out.
  for port in $(ports); do
    wait_for 30 sh -c "'$CLI' -p $port info replication | grep -qE 'role:master|master_link_status:up'" || {
      echo "cluster: replica $port never synced" >&2
      exit 1
    }
  done
  echo "cluster: 3 masters + 3 replicas on 127.0.0.1:$BASE_PORT-$((BASE_PORT + NODES - 1)), slidewin loaded on each"
  echo "cluster: connect with: $CLI -c -p $BASE_PORT"
  echo "cluster: try:          $CLI -c -p $BASE_PORT SLIDEWIN.CHECK '{user:42}:ip' 5 60000"
  echo "cluster: stop with:    make cluster-stop"
}

stop() {
  for port in $(ports); do
    local dir="$CLUSTER_DIR/$port"
    [ -f "$dir/server.pid" ] || continue
    local pid
    pid=$(cat "$dir/server.pid" 2>/dev/null || true)
    "$CLI" -p "$port" shutdown nosave >/dev/null 2>&1 || true
    if [ -n "$pid" ] && ! wait_for 10 sh -c "! kill -0 $pid"; then
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$dir/server.pid"
  done
  echo "cluster: stopped"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) "$CLI" -p "$BASE_PORT" cluster nodes ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
