#!/usr/bin/env bash
# install_test.sh BUILD_DIR CONSUMER_SOURCE
# meson install into a scratch DESTDIR, then compile and run a consumer with nothing but
# `pkg-config --cflags --libs ordo`: proves the installed headers are self-contained and the
# .pc file is right.
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
meson install -C "$build" --no-rebuild --quiet --destdir "$tmp/root"
pc=$(find "$tmp/root" -name ordo.pc | head -n 1)
[ -n "$pc" ] || { echo "ordo.pc was not installed"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR="$tmp/root"
flags=$(pkg-config --cflags --libs ordo)
c++ -std=c++20 -Wall -Wextra -Wpedantic -Werror "$src" $flags -o "$tmp/consumer"
lib=$(dirname "$(find "$tmp/root" -name 'libordo.so*' | head -n 1)")
out=$(LD_LIBRARY_PATH="$lib" "$tmp/consumer")
echo "$out"
[ "$out" = "consumer: ok" ]
