#!/usr/bin/env bash
# Runs an image built from docker/Dockerfile as a user would (its own
# entrypoint and user, module arguments first, then server options) and
# checks that the module answers, then removes the container. It shares the
# host's network and listens on loopback only. Given the module the image
# should hold, it also checks that the image ships exactly that file.
#   scripts/docker-smoke.sh <image> [module]
set -euo pipefail
image=${1:?usage: $0 image [module]}
module=${2:-}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
name="slidewin-smoke-$$"
trap 'docker rm -f "$name" >/dev/null 2>&1 || true' EXIT
docker run -d --name "$name" --network host "$image" \
  max-limit 1000 --bind 127.0.0.1 --port "$port" >/dev/null
deadline=$((SECONDS + 20))
until redis-cli -p "$port" ping >/dev/null 2>&1; do
  [ $SECONDS -lt $deadline ] || { docker logs "$name" >&2; echo "smoke: no answer" >&2; exit 1; }
  sleep 0.2
done
user=$(docker exec "$name" /bin/busybox id -u 2>/dev/null || docker inspect -f '{{.Config.User}}' "$name")
replies=$(for _ in 1 2 3; do redis-cli -p "$port" SLIDEWIN.CHECK smoke 2 60000; done | tr '\n' ' ')
limit=$(redis-cli -p "$port" CONFIG GET slidewin.max-limit | tail -1)
[ "$replies" = "1 1 0 " ] || { echo "smoke: CHECK replied $replies" >&2; exit 1; }
[ "$limit" = "1000" ] || { echo "smoke: module argument not applied ($limit)" >&2; exit 1; }
if [ -n "$module" ]; then
  shipped=$(docker exec "$name" /bin/busybox sha256sum /usr/lib/redis/modules/libslidewin.so | cut -d' ' -f1)
  built=$(sha256sum "$module" | cut -d' ' -f1)
  [ "$shipped" = "$built" ] || { echo "smoke: the image ships another module than $module" >&2; exit 1; }
fi
case "$user" in 0|root|"") echo "smoke: the server runs as root" >&2; exit 1 ;; esac
echo "smoke: $image answers SLIDEWIN.CHECK (1 1 0), max-limit 1000 from its arguments, runs as user $user"
