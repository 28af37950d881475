#!/usr/bin/env bash
# install_test.sh BUILD_DIR SOURCE_ROOT TESTS_INSTALL_DIR
# Installs ordo as a new user would (meson install --destdir), moves the installed tree
# elsewhere (the package must be relocatable), then checks what bin/ holds and builds and runs
# tests/install/consumer.cpp through each way a user finds ordo:
#   1. pkg-config (plain, and with --define-prefix), each dependency listed once in ordo.pc;
#   2. CMake: find_package(ordo) and the imported target ordo::ordo;
#   3. meson: dependency('ordo') from another meson project with ordo as its subproject
#      (subprojects/ordo, wrap-style).
# The work folder is fixed inside the build folder, so that ccache finds earlier runs' objects.
set -euo pipefail
build=$(realpath "$1") src=$(realpath "$2") here=$(realpath "$3")
work=$build/install-test
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }

meson install -C "$build" --no-rebuild --quiet --destdir "$work/stage"
prefix=$(meson introspect --buildoptions "$build" |
  python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
[ -d "$work/stage$prefix" ] || fail "nothing was installed under $prefix"
mv "$work/stage$prefix" "$work/moved"
root=$work/moved

# bin/: the user's tools and apps only; benchmarks and baselines in libexec/ordo, if anywhere.
for tool in ordorun ordo-trace ordo-heat2d; do
  [ -x "$root/bin/$tool" ] || fail "bin/ lacks $tool"
done
for f in "$root"/bin/*; do
  case $(basename "$f") in
    *-bench*|*-mpi-*|*-omp-*|*-tbb*|*-starpu*|*baseline*) fail "bin/ holds a benchmark or baseline: $f" ;;
  esac
done
echo "bin: $(cd "$root/bin" && echo *)"
[ ! -d "$root/libexec/ordo" ] || echo "libexec/ordo: $(cd "$root/libexec/ordo" && echo *)"

lib=$(dirname "$(find "$root" -name 'libordo.so' | head -n 1)")
run_consumer() {
  local out
  out=$(LD_LIBRARY_PATH="$lib" "$1")
  [ "$out" = "consumer: ok" ] || fail "$2: the consumer printed '$out'"
  echo "ok: $2"
}

# 1. pkg-config.
pc=$(find "$root" -name ordo.pc | head -n 1)
[ -n "$pc" ] || fail "ordo.pc was not installed"
for lib_name in boost_context pthread; do
  n=$(grep -o -- "$lib_name" "$pc" | wc -l)
  [ "$n" -le 1 ] || fail "ordo.pc lists $lib_name $n times: $(grep Libs "$pc")"
done
PKG_CONFIG_PATH=$(dirname "$pc")
export PKG_CONFIG_PATH
for mode in "" --define-prefix; do
  flags=$(pkg-config $mode --cflags --libs ordo)
  inc=$(pkg-config $mode --cflags-only-I ordo | awk '{ sub(/^-I/, "", $1); print $1 }')
  [ -f "$inc/ordo/ordo.hpp" ] || fail "pkg-config $mode gives include folder '$inc' without ordo/ordo.hpp"
  # shellcheck disable=SC2086 # one word per flag
  c++ -std=c++20 -Wall -Wextra -Wpedantic -Werror "$here/consumer.cpp" $flags -o "$work/consumer-pc"
  run_consumer "$work/consumer-pc" "pkg-config ${mode:-(plain)}"
done
unset PKG_CONFIG_PATH

# 2. CMake.
mkdir -p "$work/cmake"
cmake -S "$here/cmake" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$root" -DCONSUMER_SOURCE="$here/consumer.cpp" \
  >"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; fail "cmake could not configure the consumer"; }
cmake --build "$work/cmake" >>"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; fail "cmake could not build it"; }
run_consumer "$work/cmake/consumer" "cmake find_package(ordo)"

# 3. meson, ordo as a subproject of the consumer's project.
proj=$work/meson
mkdir -p "$proj/subprojects"
cp "$here/meson-consumer/meson.build" "$here/consumer.cpp" "$proj/"
ln -s "$src" "$proj/subprojects/ordo"
cp "$here/meson-consumer/ordo.wrap" "$proj/subprojects/"
(cd "$proj" && meson setup build --buildtype=plain --force-fallback-for=ordo >"$work/meson.log" 2>&1 &&
  meson compile -C build >>"$work/meson.log" 2>&1) ||
  { tail -40 "$work/meson.log"; fail "meson could not build the consumer with ordo as a subproject"; }
lib=$proj/build/subprojects/ordo/api
run_consumer "$proj/build/consumer" "meson dependency('ordo') from a subproject"
echo "install: pkg-config, CMake and meson consumers built and ran"
