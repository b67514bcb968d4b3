#!/usr/bin/env bash
# Runs the integration suite: every test program of tests/ (each file, or
# each folder with a main.rs and the files it declares, is one program, and
# each runs its tests on its own threads), JOBS programs at a
# time, the longest first. A program's output is printed whole when it ends,
# so programs never interleave; the run fails if any program fails, and the
# summary names each one with its wall time.
#
#   scripts/run-suite.sh PROFILE JOBS [PROGRAM ...] [-- TEST-ARGS ...]
#
# PROFILE: the cargo profile to build the programs with (make test: itest);
# JOBS: how many programs run at once; PROGRAM: names of tests/ programs
# (tests/<name>.rs or tests/<name>/main.rs; default: all of them);
# TEST-ARGS go to every program (a filter, --test-threads ...). make test
# and make test-docker run it; the environment (CARGO_TARGET_DIR,
# SLIDEWIN_*) passes through.
set -uo pipefail
cd "$(dirname "$0")/.."
profile=${1:?usage: scripts/run-suite.sh PROFILE JOBS [PROGRAM ...] [-- TEST-ARGS ...]}
jobs=${2:?usage: scripts/run-suite.sh PROFILE JOBS [PROGRAM ...] [-- TEST-ARGS ...]}
shift 2
case $jobs in '' | *[!0-9]* | 0) echo "run-suite: JOBS must be a number above 0, not '$jobs'" >&2; exit 2 ;; esac
names=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do names+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
test_args=("$@")

# The programs that take longest on this project's machines (CI's 2 cores)
# start first, so that the last to finish is a short one.
longest_first="cluster bounds ids parity check compact multi surface top upgrade"

# A program's source: tests/<name>.rs, or tests/<name>/main.rs (cargo's
# two forms of a test target; tests/support/ has no main.rs: no program).
source_of() { # name
  if [ -f "tests/$1.rs" ]; then echo "tests/$1.rs"; elif [ -f "tests/$1/main.rs" ]; then echo "tests/$1/main.rs"; fi
}
if [ ${#names[@]} -eq 0 ]; then
  for f in tests/*.rs; do names+=("$(basename "$f" .rs)"); done
  for f in tests/*/main.rs; do [ -f "$f" ] && names+=("$(basename "$(dirname "$f")")"); done
fi
ordered=()
for n in $longest_first; do
  for m in "${names[@]}"; do [ "$m" = "$n" ] && ordered+=("$n"); done
done
for m in "${names[@]}"; do
  case " $longest_first " in *" $m "*) ;; *) ordered+=("$m") ;; esac
done

# Build them all (cargo's own output, errors included), then ask cargo for
# each program's path.
build_args=()
for n in "${ordered[@]}"; do
  [ -n "$(source_of "$n")" ] || { echo "run-suite: no tests/$n.rs or tests/$n/main.rs" >&2; exit 2; }
  build_args+=(--test "$n")
done
cargo test --profile "$profile" "${build_args[@]}" --no-run || exit 1
paths=$(cargo test --profile "$profile" "${build_args[@]}" --no-run --message-format=json 2>/dev/null |
  python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["target"]["name"], m["executable"])
') || exit 1

logs=$(mktemp -d /tmp/run-suite.XXXXXX)
trap 'rm -rf "$logs"' EXIT
declare -A exe started
while read -r name path; do exe[$name]=$path; done <<<"$paths"
for n in "${ordered[@]}"; do
  [ -n "${exe[$n]:-}" ] || { echo "run-suite: cargo built no program for $(source_of "$n")" >&2; exit 1; }
done

failed=()
summary=()
finish() { # name: print its output and record its result
  local n=$1 rc
  rc=$(cat "$logs/$n.rc")
  echo "== $(source_of "$n"): $([ "$rc" = 0 ] && echo ok || echo "FAILED (exit $rc)") in $(cat "$logs/$n.secs") s"
  cat "$logs/$n.out"
  summary+=("$(printf '%6s s  %-10s %s' "$(cat "$logs/$n.secs")" "$n" "$(grep -h '^test result' "$logs/$n.out" | tail -1)")")
  [ "$rc" = 0 ] || failed+=("$n")
}
run_one() { # name
  local n=$1 start=$SECONDS rc
  "${exe[$n]}" ${test_args[@]+"${test_args[@]}"} >"$logs/$n.out" 2>&1
  rc=$?
  echo $((SECONDS - start)) >"$logs/$n.secs"
  echo $rc >"$logs/$n.rc"
}
running=()
for n in "${ordered[@]}"; do
  while [ ${#running[@]} -ge "$jobs" ]; do
    wait -n 2>/dev/null || true
    still=()
    for r in "${running[@]}"; do
      if [ -f "$logs/$r.rc" ]; then finish "$r"; else still+=("$r"); fi
    done
    running=(${still[@]+"${still[@]}"})
  done
  run_one "$n" &
  running+=("$n")
done
wait
for r in ${running[@]+"${running[@]}"}; do finish "$r"; done

echo "== the integration suite: ${#ordered[@]} programs, $jobs at a time, $SECONDS s"
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "run-suite: FAILED: ${failed[*]}" >&2
  exit 1
fi
