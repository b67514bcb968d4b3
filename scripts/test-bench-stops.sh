#!/usr/bin/env bash
# Checks that bench/bench.py stops the server it started on every exit path:
# after a normal run, and when it is sent SIGTERM in the middle of one or
# while a server is starting.
# Its servers are recognised by their working directory, the temp dir the
# bench makes (slidewin-bench-*): servers rewrite their process title.
set -uo pipefail
cd "$(dirname "$0")/.."
# The project's virtual environment (scripts/deps.sh) has redis-py.
PYTHON=${PYTHON:-$PWD/.venv/bin/python}
passed=0 failed=0
servers() {
  local p
  for p in $(pgrep -f "redis-server|valkey-server"); do
    case "$(readlink "/proc/$p/cwd" 2>/dev/null)" in */slidewin-bench-*) echo "$p" ;; esac
  done
}
wait_for() { # wait_for SECONDS CMD...: poll until CMD succeeds
  local deadline=$((SECONDS + $1)); shift
  until "$@"; do [ $SECONDS -lt $deadline ] || return 1; sleep 0.1; done
}
# The loads the bench drives: none may outlive it either.
loads() { pgrep -f "^redis-benchmark " || true; }
no_server() { [ -z "$(servers)$(loads)" ]; }
a_server() { [ -n "$(servers)" ]; }
wait_for 10 no_server || { echo "bench-stops: a bench server or load is already running: $(servers) $(loads)"; exit 1; }

"$PYTHON" bench/bench.py --scale 0.01 --rounds 1 >/dev/null 2>&1
if no_server; then passed=$((passed + 1)); else
  failed=$((failed + 1)); echo "FAIL: server or load left running after a normal run: $(servers) $(loads)"
fi

# terminated WHEN FREEZE: starts a bench, sends it SIGTERM 2 s after its
# server appears (in the middle of a load), and checks that no server is
# left. With FREEZE=freeze the server is stopped (SIGSTOP) the moment it
# appears and thawed after the signal, so the signal lands while the bench
# still waits for the first PING: a window an unfrozen start crosses in a
# few ms.
terminated() {
  local when=$1 freeze=$2 bench server=""
  "$PYTHON" bench/bench.py --scale 0.5 --rounds 1 >/dev/null 2>&1 &
  bench=$!
  local deadline=$((SECONDS + 30))
  while [ -z "$server" ] && [ $SECONDS -lt $deadline ]; do
    server=$(servers)
  done
  if [ -z "$server" ]; then
    kill -9 "$bench" 2>/dev/null
    failed=$((failed + 1)); echo "FAIL: the bench never started a server"
    return
  fi
  if [ "$freeze" = freeze ]; then kill -STOP $server; else sleep 2; fi
  kill -TERM "$bench"
  if [ "$freeze" = freeze ]; then sleep 0.5; kill -CONT $server 2>/dev/null; fi
  wait "$bench" 2>/dev/null
  if wait_for 15 no_server; then passed=$((passed + 1)); else
    failed=$((failed + 1)); echo "FAIL: server or load left running after SIGTERM $when: $(servers) $(loads)"
    { servers; loads; } | xargs -r kill -9
  fi
}
# at_load: SIGTERM the moment a load (redis-benchmark) appears, which can
# land while the bench is still inside Popen: the load must not outlive it.
at_load() {
  local bench load=""
  "$PYTHON" bench/bench.py --scale 0.5 --rounds 1 >/dev/null 2>&1 &
  bench=$!
  local deadline=$((SECONDS + 60))
  while [ -z "$load" ] && [ $SECONDS -lt $deadline ]; do load=$(loads); done
  if [ -z "$load" ]; then
    kill -9 "$bench" 2>/dev/null
    failed=$((failed + 1)); echo "FAIL: the bench never started a load"
    return
  fi
  kill -TERM "$bench"
  wait "$bench" 2>/dev/null
  if wait_for 15 no_server; then passed=$((passed + 1)); else
    failed=$((failed + 1)); echo "FAIL: server or load left running after SIGTERM as a load started: $(servers) $(loads)"
    { servers; loads; } | xargs -r kill -9
  fi
}
terminated "in a run" no
terminated "during its start" freeze
at_load
echo "bench-stops: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
