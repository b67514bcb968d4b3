#!/usr/bin/env bash
# Checks that bench/bench.py stops the server it started on every exit path:
# after a normal run, and when it is sent SIGTERM in the middle of one or
# while a server is starting.
# Its servers are recognised by their working directory, the temp dir the
# bench makes (slidewin-bench-*): servers rewrite their process title.
set -uo pipefail
cd "$(dirname "$0")/.."
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
no_server() { [ -z "$(servers)" ]; }
a_server() { [ -n "$(servers)" ]; }
wait_for 10 no_server || { echo "bench-stops: a bench server is already running: $(servers)"; exit 1; }

python3 bench/bench.py --scale 0.01 --rounds 1 >/dev/null 2>&1
if no_server; then passed=$((passed + 1)); else
  failed=$((failed + 1)); echo "FAIL: server left running after a normal run: $(servers)"
fi

python3 bench/bench.py --scale 0.5 --rounds 1 >/dev/null 2>&1 &
bench=$!
if wait_for 30 a_server; then
  kill -TERM "$bench"
  wait "$bench" 2>/dev/null
  if wait_for 15 no_server; then passed=$((passed + 1)); else
    failed=$((failed + 1)); echo "FAIL: server left running after SIGTERM: $(servers)"
    servers | xargs -r kill -9
  fi
else
  kill -9 "$bench" 2>/dev/null
  failed=$((failed + 1)); echo "FAIL: the bench never started a server"
fi
# SIGTERM while a server is still starting, before it answers PING: the
# server is frozen (SIGSTOP) the moment it appears, so the bench is held in
# its wait for the first PING when the signal lands; thawed right after.
python3 bench/bench.py --scale 0.5 --rounds 1 >/dev/null 2>&1 &
bench=$!
deadline=$((SECONDS + 30)) frozen=""
while [ -z "$frozen" ] && [ $SECONDS -lt $deadline ]; do
  frozen=$(servers)
done
if [ -n "$frozen" ]; then
  kill -STOP $frozen
  kill -TERM "$bench"
  sleep 0.5
  kill -CONT $frozen 2>/dev/null
  wait "$bench" 2>/dev/null
  if wait_for 15 no_server; then passed=$((passed + 1)); else
    failed=$((failed + 1)); echo "FAIL: server left running after SIGTERM during its start: $(servers)"
    servers | xargs -r kill -9
  fi
else
  kill -9 "$bench" 2>/dev/null
  failed=$((failed + 1)); echo "FAIL: the bench never started a server"
fi
echo "bench-stops: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
