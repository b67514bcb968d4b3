#!/usr/bin/env bash
# Builds a local stand-in for the official Redis or Valkey image, FROM
# scratch and without any registry: one of the suite's servers (see
# scripts/server-path.sh) and redis-cli with the shared libraries they need,
# a busybox for the shell steps of a Dockerfile, a non-root user of uid 999
# (`redis`, or `valkey` for a Valkey server, as in the official images) and
# /data. A Valkey server is installed as valkey-server with the redis-server
# name linked to it, as Valkey's own install does.
#
#   scripts/docker-standin.sh [tag] [server]
#       (defaults: slidewin-standin-redis:7.0 redis-7.0)
set -euo pipefail

TAG=${1:-slidewin-standin-redis:7.0}
SERVER=${2:-redis-7.0}
here=$(cd "$(dirname "$0")/.." && pwd)
binary=$("$here/scripts/server-path.sh" "$SERVER")
case "$SERVER" in
  valkey-*) user=valkey ;;
  *) user=redis ;;
esac
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

command -v redis-cli >/dev/null || { echo "docker-standin: redis-cli missing (make deps)" >&2; exit 1; }
command -v busybox >/dev/null || { echo "docker-standin: busybox missing (apt-get install busybox-static)" >&2; exit 1; }
if [ "$user" = valkey ]; then
  copy_with_libs "$binary" valkey-server
  ln -sf valkey-server "$ctx/root/usr/local/bin/redis-server"
else
  copy_with_libs "$binary" redis-server
fi
copy_with_libs "$(command -v redis-cli)" redis-cli
cp "$(readlink -f "$(command -v busybox)")" "$ctx/root/bin/busybox"
for applet in sh cp mkdir ls cat rm chown chmod; do ln -sf busybox "$ctx/root/bin/$applet"; done
printf 'root:x:0:0:root:/root:/bin/sh\n%s:x:999:999:%s:/data:/bin/false\n' "$user" "$user" >"$ctx/root/etc/passwd"
printf 'root:x:0:\n%s:x:999:\n' "$user" >"$ctx/root/etc/group"

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
echo "docker-standin: built $TAG from $SERVER ($("$binary" --version | sed -n 's/.*v=\([^ ]*\).*/\1/p'), $binary), user $user"
