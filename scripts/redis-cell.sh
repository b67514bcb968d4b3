#!/usr/bin/env bash
# Builds redis-cell, the GCRA module `make bench` compares CL.THROTTLE with,
# from crates.io at a pinned version, into $CARGO_TARGET_DIR/redis-cell/
# (./target/redis-cell/ unless CARGO_TARGET_DIR is set), and prints
# the module's path. crates.io holds 0.2.2 (GitHub's newer releases are not
# published there, and this project's machines reach only crates.io); it
# loads on the four servers of the suite. Built once, then reused.
set -euo pipefail
VERSION=0.2.2
root=$(cd "$(dirname "$0")/.." && pwd)
out=${CARGO_TARGET_DIR:-$root/target}/redis-cell
so=$out/libredis_cell-$VERSION.so
if [ -f "$so" ]; then
    echo "$so"
    exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A throwaway crate that depends on it, so that cargo fetches its source.
mkdir -p "$work/fetch/src"
cat > "$work/fetch/Cargo.toml" <<TOML
[package]
name = "redis-cell-fetch"
version = "0.0.0"
edition = "2021"

[dependencies]
redis-cell = "=$VERSION"
TOML
touch "$work/fetch/src/lib.rs"
(cd "$work/fetch" && cargo fetch --quiet) >&2
src=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/"redis-cell-$VERSION" 2>/dev/null | head -1)
if [ -z "$src" ]; then
    echo "redis-cell $VERSION: source not found after cargo fetch" >&2
    exit 1
fi
cp -r "$src" "$work/cell"
# An old crate: its warnings are not ours.
(cd "$work/cell" && CARGO_TARGET_DIR="$work/target" cargo build --release --quiet 2>/dev/null) || {
    echo "redis-cell $VERSION did not build (run: cd $src && cargo build --release)" >&2
    exit 1
}
mkdir -p "$out"
cp "$work/target/release/libredis_cell.so" "$so"
echo "$so"
