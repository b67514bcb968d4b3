#!/usr/bin/env bash
# Checks what `docker build` is sent from the repo root (.dockerignore): no
# build output (target/), no git data, no stand-in image tree. It builds a
# throwaway image that copies the context into an empty one and lists it,
# using the busybox-based stand-in image (make test-docker builds it).
#   scripts/docker-context-check.sh [image with busybox]
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-slidewin-standin:context-check}
if ! docker image inspect "$base" >/dev/null 2>&1; then
  scripts/docker-standin.sh "$base" redis-7.0 >/dev/null
fi
mkdir -p target  # make sure there is something to leave out
listing=$(printf 'FROM %s\nCOPY . /ctx\nRUN ["/bin/busybox", "find", "/ctx", "-maxdepth", "2"]\n' "$base" |
  DOCKER_BUILDKIT=0 docker build --no-cache -f - . 2>&1)
bad=$(echo "$listing" | grep -E '^/ctx/(target|\.git|docker/standin)(/|$)' || true)
if [ -n "$bad" ]; then
  echo "docker-context-check: the build context holds what .dockerignore should leave out:" >&2
  echo "$bad" | head >&2
  exit 1
fi
echo "$listing" | grep -q '^/ctx/src/lib.rs$' || { echo "docker-context-check: no sources in the context?" >&2; echo "$listing" | tail >&2; exit 1; }
echo "docker-context-check: the build context holds the sources and no target/, .git or docker/standin"
