#!/usr/bin/env bash
# Tests scripts/find-libclang.sh against fake library folders: it must find
# libclang under each name bindgen accepts and never take libclang-cpp for it.
set -uo pipefail
probe="$(cd "$(dirname "$0")" && pwd)/find-libclang.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0

# expect NAME EXPECTED_FILE_OR_EMPTY FILE...: makes a folder holding FILEs,
# runs the probe on it and compares what it prints.
expect() {
  local name=$1 want=$2
  shift 2
  local dir="$tmp/$name"
  mkdir -p "$dir"
  for f in "$@"; do : >"$dir/$f"; done
  local got
  got=$("$probe" "$dir")
  local st=$?
  if [ -z "$want" ]; then
    if [ $st -ne 0 ] && [ -z "$got" ]; then passed=$((passed + 1)); else
      failed=$((failed + 1)); echo "FAIL $name: expected none, got '$got' (exit $st)"
    fi
  elif [ $st -eq 0 ] && [ "$got" = "$dir/$want" ]; then passed=$((passed + 1)); else
    failed=$((failed + 1)); echo "FAIL $name: expected $dir/$want, got '$got' (exit $st)"
  fi
}

expect fresh-debian "" libclang-cpp.so.14 libLLVM-14.so.1
expect cpp-unversioned "" libclang-cpp.so libclang-cpp.so.14
expect static-only "" libclang.a libclangBasic.a libclang_rt.asan-x86_64.so
expect plain libclang.so libclang.so
expect versioned-dash libclang-14.so libclang-cpp.so.14 libclang-14.so
expect so-version libclang.so.1 libclang.so.1
expect dash-so-version libclang-14.so.1 libclang-cpp.so.14 libclang-14.so.1
expect llvm-dir libclang-14.0.6.so libclang-14.0.6.so
expect empty ""

# Several folders: the first that holds libclang wins; missing folders are skipped.
mkdir -p "$tmp/a" "$tmp/b"
: >"$tmp/a/libclang-cpp.so.14"
: >"$tmp/b/libclang.so.1"
got=$("$probe" "$tmp/missing" "$tmp/a" "$tmp/b")
if [ "$got" = "$tmp/b/libclang.so.1" ]; then passed=$((passed + 1)); else
  failed=$((failed + 1)); echo "FAIL several folders: got '$got'"
fi

echo "find-libclang: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
