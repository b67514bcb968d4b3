#!/usr/bin/env bash
# The Debian package as an operator uses it (make test-deb; root, a Debian
# machine with Debian's redis-server):
#   1. apt-get install ./redis-slidewin_*.deb
#   2. Debian's redis-server, started as the redis user from Debian's own
#      redis.conf plus the documented line
#        include /etc/redis/modules-enabled/*.conf
#      answers SLIDEWIN.CHECK with the packaged module (MODULE LIST, INFO)
#   3. apt-get remove redis-slidewin: the same server, same redis.conf,
#      still starts (without the module)
#   4. apt-get purge: the snippet goes too.
# The copy of redis.conf lives in a temp folder (with its port, folder and
# log moved there); /etc/redis/redis.conf is only read.
#   scripts/test-deb.sh DEB
set -euo pipefail
deb=$(readlink -f "${1:?usage: $0 path/to/redis-slidewin_VERSION_ARCH.deb}")
here=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" = 0 ] || { echo "test-deb: needs root (apt-get install)" >&2; exit 1; }
[ -f /etc/redis/redis.conf ] && command -v redis-server >/dev/null || {
  echo "test-deb: Debian's redis-server is not installed (make deps)" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive
version=$(dpkg-deb -f "$deb" Version)
module_ver=$(echo "${version%-*}" | awk -F. '{ print $1 * 10000 + $2 * 100 + $3 }')

work=$(mktemp -d /tmp/test-deb.XXXX)
pid=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  dpkg -s redis-slidewin >/dev/null 2>&1 && apt-get purge -y -qq redis-slidewin >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
if dpkg -s redis-slidewin >/dev/null 2>&1; then
  echo "test-deb: redis-slidewin is installed already; remove it first" >&2
  trap - EXIT; rm -rf "$work"; exit 1
fi
etc_before=$(stat -c '%U:%G %a' /etc/redis)

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cp /etc/redis/redis.conf "$work/redis.conf"
cat >>"$work/redis.conf" <<EOF

# The line docs/install.md tells operators to add:
include /etc/redis/modules-enabled/*.conf

# This test's own server (not the system one): its port, folder and log.
port $port
bind 127.0.0.1
daemonize no
supervised no
dir $work
pidfile $work/redis.pid
logfile $work/redis.log
EOF
chown -R redis:redis "$work"

start() { # start: Debian's redis-server as the redis user, from the copy
  : >"$work/redis.log"; chown redis:redis "$work/redis.log"
  runuser -u redis -- redis-server "$work/redis.conf" &
  pid=$!
  local deadline=$((SECONDS + 15))
  until redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; do
    if [ $SECONDS -ge $deadline ] || ! kill -0 "$pid" 2>/dev/null; then
      echo "test-deb: the server did not start:" >&2; tail -20 "$work/redis.log" >&2; exit 1
    fi
    sleep 0.1
  done
}
stop() {
  redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
  wait "$pid" 2>/dev/null || true
  pid=""
}

echo "test-deb: apt-get install $deb"
apt-get install -y -qq "$deb" >"$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; exit 1; }
[ -f /usr/lib/redis/modules/libslidewin.so ] || { echo "test-deb: no module installed" >&2; exit 1; }
[ "$(readlink /etc/redis/modules-enabled/slidewin.conf)" = ../modules-available/slidewin.conf ] || {
  echo "test-deb: the module is not enabled" >&2; exit 1; }
[ "$(stat -c '%U:%G %a' /etc/redis)" = "$etc_before" ] || {
  echo "test-deb: /etc/redis changed owner or mode: $etc_before -> $(stat -c '%U:%G %a' /etc/redis)" >&2; exit 1; }

start
replies=$(for _ in 1 2 3; do redis-cli -p "$port" SLIDEWIN.CHECK deb 2 60000; done | tr '\n' ' ')
[ "$replies" = "1 1 0 " ] || { echo "test-deb: CHECK replied $replies" >&2; exit 1; }
listed=$(redis-cli -p "$port" MODULE LIST | tr '\n' ' ')
echo "$listed" | grep -q "name slidewin ver $module_ver path /usr/lib/redis/modules/libslidewin.so" || {
  echo "test-deb: MODULE LIST: $listed (want ver $module_ver)" >&2; exit 1; }
info_version=$(redis-cli -p "$port" INFO slidewin | tr -d '\r' | sed -n 's/^slidewin_version://p')
[ "$info_version" = "${version%-*}" ] || { echo "test-deb: slidewin_version $info_version" >&2; exit 1; }
server_version=$(redis-cli -p "$port" INFO server | tr -d '\r' | sed -n 's/^redis_version://p')
echo "test-deb: Debian's redis-server $server_version with the include line: CHECK 1 1 0, MODULE LIST ver $module_ver, slidewin_version $info_version"
stop

echo "test-deb: apt-get remove redis-slidewin"
apt-get remove -y -qq redis-slidewin >"$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; exit 1; }
[ ! -e /usr/lib/redis/modules/libslidewin.so ] && [ ! -e /etc/redis/modules-enabled/slidewin.conf ] || {
  echo "test-deb: the module or its link is still there after remove" >&2; exit 1; }
start
unknown=$(redis-cli -p "$port" SLIDEWIN.CHECK deb 2 60000 2>&1 || true)
echo "$unknown" | grep -qi "unknown command" || { echo "test-deb: after remove, CHECK: $unknown" >&2; exit 1; }
echo "test-deb: after remove the same server and redis.conf start: PING PONG, SLIDEWIN.CHECK unknown"
stop

apt-get purge -y -qq redis-slidewin >/dev/null 2>&1 || true
[ ! -e /etc/redis/modules-available/slidewin.conf ] || { echo "test-deb: purge left the snippet" >&2; exit 1; }
echo "test-deb: purge removed the snippet; PASS"
cd "$here"
