#!/usr/bin/env bash
# The coverage-guided fuzz targets of fuzz/ (cargo-fuzz, libFuzzer): the
# compact log's decoder (decode), SLIDEWIN.APPLY's parser and its
# application (apply), the command argument parsers (args), commands with
# request ids on a held log against the chunks (held). Each runs for
# SECONDS from the committed seeds (fuzz/corpus/<target>) plus what earlier
# runs found ($CARGO_TARGET_DIR/fuzz/corpus/<target>, never committed).
# A failing input (a panic: a broken oracle, an overflow, an index out of
# range; an input slower than 10 s; more than 2 GB) stops the run, is
# saved under fuzz/artifacts/<target>/ and fails the script.
#
#   scripts/fuzz.sh SECONDS [TARGET...]   (make fuzz-smoke: 25, make fuzz-cov: 600)
#
# Prints a line a target: executions, libFuzzer's coverage figures (cov:
# edges reached, ft: features), the corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-25}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(decode apply args held)

scripts/deps.sh fuzz >/dev/null
# Its own build folder: the fuzz build (instrumented, its own features)
# never touches the module's.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}/fuzz
# Every build and run take the same flags (a run with other flags builds
# again): no sanitizer, which the stable toolchain has no flag for (the code
# is safe Rust: a bug shows as a panic); optimized, with debug assertions
# and overflow checks.
flags=(--sanitizer none --release --debug-assertions)
# (all targets: cargo fuzz build takes one or all, and each is one link)
cargo fuzz build "${flags[@]}"
status=0
for t in "${targets[@]}"; do
  corpus=$CARGO_TARGET_DIR/corpus/$t
  log=$CARGO_TARGET_DIR/$t.log
  mkdir -p "$corpus"
  if cargo fuzz run "${flags[@]}" "$t" "$corpus" "fuzz/corpus/$t" -- \
    -max_total_time="$seconds" -max_len=4096 -timeout=10 -print_final_stats=1 >"$log" 2>&1; then
    ok=passed
  else
    ok=FAILED
    status=1
    # What libFuzzer said about the failing input, and where it is.
    grep -E "panicked|Test unit written|ERROR|SUMMARY|deadly|timeout|out-of-memory" "$log" | head -20 >&2 || true
  fi
  done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1 || true)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(echo "$done_line" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
  ft=$(echo "$done_line" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
  corp=$(echo "$done_line" | sed -n 's/.* corp: \([^ ]*\).*/\1/p')
  echo "fuzz: $t $ok: ${runs:-?} executions in ${seconds} s, cov: ${cov:-?} ft: ${ft:-?}, corpus ${corp:-?} (log: $log)"
done
exit $status
