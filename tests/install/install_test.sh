#!/usr/bin/env bash
# install_test.sh BUILD_DIR SOURCE_ROOT TESTS_INSTALL_DIR
# Installs ordo as a new user would (meson install --destdir), moves the installed tree
# elsewhere (the package must be relocatable), then checks what bin/ holds, runs an installed
# app and `ordorun -n 2` of it with a clean environment, builds README's example as README
# says (and as C++17: the first error says ordo needs C++20), and builds and runs
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

# The installed programs run from the moved tree with a clean environment: no LD_LIBRARY_PATH
# and no ldconfig, each finds libordo through its $ORIGIN-relative RPATH (once they exited 127,
# "libordo.so.0: cannot open shared object file").
# The programs are found by name through PATH, the only variable the environment holds.
clean=(env -i PATH="$root/bin:/usr/bin:/bin")
for f in "$root"/bin/* "$root"/libexec/ordo/*; do
  [ -f "$f" ] && [ -x "$f" ] && head -c 4 "$f" | grep -q ELF || continue
  missing=$("${clean[@]}" LD_TRACE_LOADED_OBJECTS=1 "$f" | grep "not found" || true)
  [ -z "$missing" ] || fail "$f does not find its libraries in a moved prefix: $missing"
done
out=$("${clean[@]}" ordo-heat2d --size 64x48 --blocks 2x2 --iters 3 --verify 2>&1) ||
  fail "the installed ordo-heat2d failed in a moved prefix: $out"
case $out in *verify=ok*) ;; *) fail "the installed ordo-heat2d: $out" ;; esac
out=$("${clean[@]}" ordorun --timeout 120 -n 2 ordo-heat2d --size 64x48 --blocks 2x2 --iters 3 \
  --verify 2>&1) || fail "ordorun -n 2 of the installed ordo-heat2d failed: $out"
case $out in *verify=ok*ranks=2*) ;; *) fail "ordorun -n 2 of the installed ordo-heat2d: $out" ;; esac
echo "ok: ordo-heat2d and ordorun -n 2 ordo-heat2d from the moved prefix, clean environment"

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
  # ordo.pc's RPATH: the program runs without LD_LIBRARY_PATH too.
  out=$("${clean[@]}" "$work/consumer-pc" 2>&1) ||
    fail "pkg-config ${mode:-(plain)}: the consumer needs LD_LIBRARY_PATH: $out"
done
# The prefix variable is the moved root, with and without --define-prefix.
for mode in "" --define-prefix; do
  at=$(pkg-config $mode --variable=prefix ordo)
  [ "$(realpath "$at")" = "$(realpath "$root")" ] ||
    fail "pkg-config $mode --variable=prefix ordo gives '$at', not the prefix $root"
  echo "ok: pkg-config $mode --variable=prefix ordo: $at"
done
# The README's example and its command line, exactly as the README writes them, in a clean
# environment but for PKG_CONFIG_PATH (a moved prefix is one pkg-config does not search).
mkdir -p "$work/readme"
awk '/^## Use/ { use = 1 } use && /^```cpp$/ { code = 1; next } code && /^```$/ { exit } code' \
  "$src/README.md" >"$work/readme/scale.cpp"
line=$(awk '/^## Use/ { use = 1 } use && /^```sh$/ { sh = 1; next } sh { print; exit }' "$src/README.md")
case $line in *pkg-config*scale*) ;; *) fail "README's build line not found after its example: '$line'" ;; esac
out=$(cd "$work/readme" && "${clean[@]}" PKG_CONFIG_PATH="$PKG_CONFIG_PATH" bash -c "$line" 2>&1) ||
  fail "README's example, built as README says ($line), failed: $out"
[ "$out" = "b[0] = 1" ] || fail "README's example printed '$out', not 'b[0] = 1'"
echo "ok: README's example built and run as written: $line"
# Without C++20 (g++ 12 defaults to C++17), the first error is ordo.hpp's first line saying so.
# shellcheck disable=SC2046 # one word per flag
if c++ -std=c++17 -c "$work/readme/scale.cpp" -o "$work/readme/scale17.o" \
    $(pkg-config --cflags ordo) 2>"$work/readme/err17"; then
  fail "README's example compiled as C++17"
fi
first=$(grep -m1 "error" "$work/readme/err17")
case $first in *ordo/ordo.hpp:1:*"ordo needs C++20 (-std=c++20)"*) ;;
  *) fail "compiled as C++17, the first error is not ordo.hpp's first line: $first" ;; esac
echo "ok: as C++17: $first"
# README's line as a user who leaves -std=c++20 out types it: where the compiler's default is
# older than C++20 (g++ 12: C++17), the first error is the same line.
default=$(c++ -x c++ -dM -E /dev/null | awk '$2 == "__cplusplus" { sub(/L$/, "", $3); print $3 }')
if [ "${default:-0}" -lt 202002 ]; then
  bare=${line/-std=c++20 /}
  [ "$bare" != "$line" ] || fail "README's build line has no '-std=c++20 ' to leave out: $line"
  if out=$(cd "$work/readme" && "${clean[@]}" PKG_CONFIG_PATH="$PKG_CONFIG_PATH" bash -c "$bare" 2>&1); then
    fail "README's example compiled without -std=c++20 ($bare)"
  fi
  first=$(grep -m1 "error" <<<"$out")
  case $first in *ordo/ordo.hpp:1:*"ordo needs C++20 (-std=c++20)"*) ;;
    *) fail "without -std=c++20 ($bare), the first error is not ordo.hpp's first line: $first" ;; esac
  echo "ok: without -std=c++20 (the compiler's default, __cplusplus $default): $first"
fi
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
