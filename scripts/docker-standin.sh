#!/usr/bin/env bash
# Builds a local stand-in for the official Redis image, FROM scratch and
# without any registry: the host's redis-server (and redis-cli) with the
# shared libraries they need, a busybox for the shell steps of a Dockerfile,
# a non-root `redis` user (uid 999, as in the official image) and /data.
#
#   scripts/docker-standin.sh [tag]      (default slidewin-standin-redis:7.0)
set -euo pipefail

TAG=${1:-slidewin-standin-redis:7.0}
here=$(cd "$(dirname "$0")/.." && pwd)
ctx="$here/docker/standin"
rm -rf "$ctx" && mkdir -p "$ctx/root/usr/local/bin" "$ctx/root/etc" "$ctx/root/data" "$ctx/root/bin"

copy_with_libs() { # copy_with_libs <binary> <name in /usr/local/bin>
  local bin
  bin=$(readlink -f "$1")
  cp "$bin" "$ctx/root/usr/local/bin/$2"
  ldd "$bin" | awk '/=>/ { print $3 } /^[[:space:]]*\// { print $1 }' | while read -r lib; do
    [ -n "$lib" ] && [ -e "$lib" ] || continue
    mkdir -p "$ctx/root$(dirname "$lib")"
    cp -L "$lib" "$ctx/root$lib"
  done
}

command -v redis-server >/dev/null || { echo "docker-standin: redis-server missing (make deps)" >&2; exit 1; }
command -v busybox >/dev/null || { echo "docker-standin: busybox missing (apt-get install busybox-static)" >&2; exit 1; }
copy_with_libs "$(command -v redis-server)" redis-server
copy_with_libs "$(command -v redis-cli)" redis-cli
cp "$(readlink -f "$(command -v busybox)")" "$ctx/root/bin/busybox"
for applet in sh cp mkdir ls cat rm chown; do ln -sf busybox "$ctx/root/bin/$applet"; done
printf 'root:x:0:0:root:/root:/bin/sh\nredis:x:999:999:redis:/data:/bin/false\n' >"$ctx/root/etc/passwd"
printf 'root:x:0:\nredis:x:999:\n' >"$ctx/root/etc/group"

cat >"$ctx/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY root/ /
RUN ["/bin/busybox", "chown", "-R", "999:999", "/data"]
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
WORKDIR /data
EXPOSE 6379
CMD ["redis-server"]
DOCKERFILE

DOCKER_BUILDKIT=0 docker build -q -t "$TAG" "$ctx" >/dev/null
echo "docker-standin: built $TAG from $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/redis-server \1/p')"
