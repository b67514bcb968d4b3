#!/usr/bin/env bash
# Makes a release from one build of the module (make dist):
#   slidewin-VERSION-linux-ARCH.tar.gz   the module, the FUNCTION library and
#       its EVAL form, a redis.conf snippet, README, CHANGELOG, LICENSE and a
#       SHA256SUMS of those files
#   redis-slidewin_VERSION-1_ARCH.deb    the same module at
#       /usr/lib/redis/modules/libslidewin.so, the snippet at
#       /etc/redis/modules-available/slidewin.conf (enabled by a link in
#       /etc/redis/modules-enabled/, which redis.conf includes), the library
#       under /usr/share/redis-slidewin/
#   SHA256SUMS                           of the two
# VERSION is Cargo.toml's; the Python client's must be the same, and
# CHANGELOG.md must have its entry. Files get the time of the last commit
# (SOURCE_DATE_EPOCH), so the same build gives the same archives.
#
#   scripts/dist.sh MODULE OUT_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
module=${1:?usage: $0 MODULE OUT_DIR}
out=${2:?usage: $0 MODULE OUT_DIR}
[ -f "$module" ] || { echo "dist: no module at $module (make build)" >&2; exit 1; }
command -v dpkg-deb >/dev/null && command -v dpkg-shlibdeps >/dev/null || {
  echo "dist: dpkg-deb and dpkg-shlibdeps are needed: apt-get install dpkg-dev (make deps)" >&2; exit 1; }

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$here/Cargo.toml" | head -1)
py_project=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$here/clients/python/pyproject.toml" | head -1)
py_module=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$here/clients/python/slidewin/__init__.py")
if [ "$py_project" != "$version" ] || [ "$py_module" != "$version" ]; then
  echo "dist: Cargo.toml says $version, clients/python/pyproject.toml $py_project, slidewin.__version__ $py_module: one version (docs/install.md, Versions)" >&2
  exit 1
fi
grep -q "^## \[$version\] - " "$here/CHANGELOG.md" || {
  echo "dist: CHANGELOG.md has no '## [$version] - date' entry" >&2; exit 1; }
arch=$(dpkg --print-architecture)
case "$arch" in amd64) uname_arch=x86_64 ;; arm64) uname_arch=aarch64 ;; *) uname_arch=$arch ;; esac
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$here" log -1 --format=%ct 2>/dev/null || date +%s)}

name=slidewin-$version-linux-$uname_arch
deb=redis-slidewin_$version-1_$arch.deb
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The snippet, for a module installed at $1.
snippet() {
  cat <<EOF
# slidewin $version: the sliding-window rate limiter module.
# Included from redis.conf (see docs/install.md, "Release packages"):
#   include /etc/redis/modules-enabled/*.conf
loadmodule $1
# Module settings go after the loadmodule line, for example:
# slidewin.max-limit 100000
# slidewin.max-window-ms 31622400000
# slidewin.log-type zset
EOF
}

# The tarball.
t=$work/$name
mkdir -p "$t"
install -m 0755 "$module" "$t/libslidewin.so"
install -m 0644 "$here/lua/slidewin.lua" "$t/slidewin.lua"
"$here/scripts/eval-script.sh" >"$t/slidewin-eval.lua"
snippet /usr/lib/redis/modules/libslidewin.so >"$t/slidewin.conf"
install -m 0644 "$here/README.md" "$here/CHANGELOG.md" "$here/LICENSE" "$t/"
(cd "$t" && sha256sum libslidewin.so slidewin.lua slidewin-eval.lua slidewin.conf README.md CHANGELOG.md LICENSE >SHA256SUMS)
find "$t" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
  -C "$work" -cf - "$name" | gzip -n -9 >"$out/$name.tar.gz"

# The Debian package, from the same files.
d=$work/deb
# Redis loads a module only with execute permission.
install -D -m 0755 "$t/libslidewin.so" "$d/usr/lib/redis/modules/libslidewin.so"
install -D -m 0644 "$t/slidewin.conf" "$d/etc/redis/modules-available/slidewin.conf"
install -D -m 0644 "$t/slidewin.lua" "$d/usr/share/redis-slidewin/slidewin.lua"
install -D -m 0644 "$t/slidewin-eval.lua" "$d/usr/share/redis-slidewin/slidewin-eval.lua"
install -D -m 0644 "$here/LICENSE" "$d/usr/share/doc/redis-slidewin/copyright"
install -D -m 0644 "$here/README.md" "$d/usr/share/doc/redis-slidewin/README.md"
gzip -n -9 -c "$here/CHANGELOG.md" >"$d/usr/share/doc/redis-slidewin/changelog.gz"
mkdir -p "$d/DEBIAN"
# The shared libraries the module needs, as Debian names their packages.
mkdir -p "$work/shlibs/debian"
printf 'Source: redis-slidewin\n\nPackage: redis-slidewin\nArchitecture: any\n' >"$work/shlibs/debian/control"
depends=$(cd "$work/shlibs" && dpkg-shlibdeps -O "$d/usr/lib/redis/modules/libslidewin.so" 2>/dev/null |
  sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "dist: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
size=$(du -sk --exclude=DEBIAN "$d" | cut -f1)
cat >"$d/DEBIAN/control" <<EOF
Package: redis-slidewin
Version: $version-1
Architecture: $arch
Maintainer: the slidewin authors <slidewin@localhost>
Installed-Size: $size
Depends: $depends
Enhances: redis-server
Section: database
Priority: optional
Description: exact sliding-window rate limiter module for Redis and Valkey
 SLIDEWIN.CHECK key limit window_ms: at most limit calls in any trailing
 window, decided on the server's clock, atomically. The module is installed
 at /usr/lib/redis/modules/libslidewin.so and enabled by
 /etc/redis/modules-enabled/slidewin.conf, which redis.conf loads with
 "include /etc/redis/modules-enabled/*.conf". The FUNCTION library and its
 EVAL form, for servers that cannot load modules, are in
 /usr/share/redis-slidewin/.
EOF
echo /etc/redis/modules-available/slidewin.conf >"$d/DEBIAN/conffiles"
cat >"$d/DEBIAN/postinst" <<'EOF'
#!/bin/sh
# Enables the module on first install (the link is the switch: an operator
# who removed it keeps it removed across upgrades). A running server loads
# the module at its next restart.
set -e
if [ "$1" = configure ] && [ -z "$2" ]; then
  mkdir -p /etc/redis/modules-enabled
  ln -sf ../modules-available/slidewin.conf /etc/redis/modules-enabled/slidewin.conf
fi
EOF
cat >"$d/DEBIAN/postrm" <<'EOF'
#!/bin/sh
# Without the module, nothing may load it: the link goes with the package,
# so a server whose redis.conf includes /etc/redis/modules-enabled/*.conf
# still starts (the snippet itself stays, as a configuration file, until
# purge).
set -e
if [ "$1" = remove ] || [ "$1" = purge ]; then
  rm -f /etc/redis/modules-enabled/slidewin.conf
  rmdir --ignore-fail-on-non-empty /etc/redis/modules-enabled 2>/dev/null || true
fi
EOF
chmod 0755 "$d/DEBIAN/postinst" "$d/DEBIAN/postrm"
find "$d" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
dpkg-deb --root-owner-group -Zxz --build "$d" "$out/$deb" >/dev/null

(cd "$out" && sha256sum "$name.tar.gz" "$deb" >SHA256SUMS)
echo "dist: $out/$name.tar.gz"
echo "dist: $out/$deb (Depends: $depends)"
echo "dist: $out/SHA256SUMS"
