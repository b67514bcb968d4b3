#!/usr/bin/env bash
# Prints the EVAL form of the FUNCTION library: lua/slidewin-eval.lua with
# lua/slidewin.lua (less its `#!lua name=slidewin` line) in place of its
# `-- @LIBRARY@` line. For servers without FUNCTION:
#   redis-cli SCRIPT LOAD "$(scripts/eval-script.sh)"
#   redis-cli EVALSHA <sha> 1 sms:limit:203.0.113.7 slidewin_check 5 60000
set -euo pipefail
lua=$(cd "$(dirname "$0")/../lua" && pwd)
frame=$lua/slidewin-eval.lua
library=$lua/slidewin.lua
[ "$(head -1 "$library")" = "#!lua name=slidewin" ] || {
  echo "eval-script: $library does not start with #!lua name=slidewin" >&2; exit 1; }
[ "$(grep -c '^-- @LIBRARY@$' "$frame")" = 1 ] || {
  echo "eval-script: $frame must hold one '-- @LIBRARY@' line" >&2; exit 1; }
while IFS= read -r line || [ -n "$line" ]; do
  if [ "$line" = "-- @LIBRARY@" ]; then
    tail -n +2 "$library"
  else
    printf '%s\n' "$line"
  fi
done <"$frame"
