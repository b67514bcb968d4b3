#!/usr/bin/env bash
# Runs the `limits` library's own tests, unmodified, against the slidewin
# storages (clients/python/slidewin/limits.py) on the four servers:
#   1. downloads limits' published source distribution at the pinned
#      version (pip download --no-binary, checked against its sha256) into
#      $CARGO_TARGET_DIR/limits-suite/ (./target unless set) and unpacks it there (nothing of it is committed);
#   2. runs its storage, strategy (moving window included) and concurrency
#      tests, sync and async, with our pytest plugin
#      (clients/python/tests/limits_plugin.py), which starts each server with
#      the module and adds the slidewin storages to their parametrisation.
# Their other storages (Redis/Memcached/MongoDB in docker, in-memory) are
# deselected and counted by reason in the summary; a slidewin test that is
# skipped fails the run.
# Environment: PYTHON (the project's .venv), SLIDEWIN_LIMITS_SERVERS (a
# space-separated subset of the four), SLIDEWIN_LIMITS_LOG_TYPES ("zset",
# "compact" or "zset compact"), SLIDEWIN_LIMITS_TESTS (fewer tests); extra
# arguments go to pytest (e.g. -k moving).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-$here/.venv/bin/python}
LIMITS_VERSION=5.8.0
LIMITS_SHA256=c9e0d74aed837e8f6f50d1fcebcf5fd8130957287206bc3799adaee5092655da
cache=${CARGO_TARGET_DIR:-$here/target}/limits-suite
src=$cache/limits-$LIMITS_VERSION

installed=$("$PYTHON" -c 'import importlib.metadata as m; print(m.version("limits"))' 2>/dev/null || true)
if [ "$installed" != "$LIMITS_VERSION" ]; then
  echo "limits-suite: limits $LIMITS_VERSION is not installed in $PYTHON (found '${installed:-none}'): run scripts/deps.sh" >&2
  exit 1
fi

if [ ! -f "$src/.unpacked" ]; then
  mkdir -p "$cache"
  req=$cache/requirements.txt
  echo "limits==$LIMITS_VERSION --hash=sha256:$LIMITS_SHA256" > "$req"
  "$PYTHON" -m pip download --quiet --disable-pip-version-check --no-binary :all: --no-deps \
    --require-hashes -r "$req" -d "$cache"
  rm -rf "$src"
  tar -xzf "$cache/limits-$LIMITS_VERSION.tar.gz" -C "$cache"
  touch "$src/.unpacked"
fi

# Their tests, as published: storage, strategy and concurrency, sync and
# async, and the Redis storages' own (key prefix).
# SLIDEWIN_LIMITS_TESTS (space-separated paths or node ids) runs fewer.
tests=(tests/test_storage.py tests/test_strategy.py tests/integration/test_concurrency.py
       tests/aio/test_storage.py tests/aio/test_strategy.py
       tests/storage/test_redis.py tests/aio/storage/test_redis.py)
if [ -n "${SLIDEWIN_LIMITS_TESTS:-}" ]; then read -r -a tests <<< "$SLIDEWIN_LIMITS_TESTS"; fi

# From their directory, with their pytest.ini (asyncio_mode=auto, their
# markers, warnings as errors), but our addopts: theirs ask for coverage and
# docker (pytest-cov, lovely-pytest-docker), which this suite does not use.
cd "$src"
export PYTHONPATH=$here/clients/python/tests${PYTHONPATH:+:$PYTHONPATH}
exec "$PYTHON" -m pytest -c pytest.ini --rootdir "$src" -p no:cacheprovider -p limits_plugin \
  -o addopts="" --tb=short -rfEsxX -q "${tests[@]}" "$@"
