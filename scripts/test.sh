#!/usr/bin/env bash
# Sets everything up on a fresh machine, builds, and runs the whole test suite: every suite in
# build/ (release), then the runtime, scheduler and api suites again under ThreadSanitizer in
# build-tsan/, the unit suites under AddressSanitizer and UBSan in build-asan/ (clang, werror,
# without hwloc; ORDO_CI_WIDE=0 leaves this stage out), then the fuzz targets for a fixed budget
# in build-fuzz/ (clang, libFuzzer, AddressSanitizer and UBSan). docs/developing.md, "CI",
# gives each stage's time.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
scripts/setup.sh
meson compile -C build
meson test -C build --print-errorlogs --num-processes 2

if [ ! -f build-tsan/build.ninja ]; then
  meson setup build-tsan --buildtype=debugoptimized -Db_sanitize=thread -Db_lundef=false >/dev/null
fi
# Regenerate first, so the introspection below sees tests added since the last build there.
ninja -C build-tsan build.ninja >/dev/null
# The files some suites' tests need built in a build folder (their test programs and what they
# depend on): suite_targets BUILD SUITE... [-SUITE...], a -SUITE leaving out its tests.
suite_targets() {
  python3 - "$@" <<'PY'
import json, os, subprocess, sys
build, args = sys.argv[1], sys.argv[2:]
take = {a for a in args if not a.startswith("-")}
leave = {a[1:] for a in args if a.startswith("-")}
def introspect(what):
    return json.loads(subprocess.check_output(["meson", "introspect", what, build]))
files = {t["id"]: t["filename"] for t in introspect("--targets")}
wanted = set()
for test in introspect("--tests"):
    suites = {s.split(":")[-1] for s in test["suite"]}
    if suites & take and not suites & leave:
        for dep in test.get("depends", []):
            wanted.update(os.path.relpath(f, build) for f in files.get(dep, []))
print(" ".join(sorted(wanted)))
PY
}
# Only what the 'tsan' suite runs is built there (its test programs and what they depend on):
# the apps, benchmarks and tools are covered by the release build above.
tsan_targets=$(suite_targets build-tsan tsan)
[ -n "$tsan_targets" ] || { echo "test.sh: no tests in the tsan suite" >&2; exit 1; }
# shellcheck disable=SC2086 # one word per target
ninja -C build-tsan $tsan_targets
# TSan's runtime needs a fixed memory layout; ASLR on newer kernels breaks it. UCX's mmap hooks
# (libordo links UCX) crash TSan's interceptors at thread start, so they are off here.
UCX_MEM_MMAP_HOOK_MODE=none TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
  setarch "$(uname -m)" -R meson test -C build-tsan --no-rebuild --print-errorlogs \
  --num-processes 2 --suite tsan

# The wide stage: AddressSanitizer and UBSan on the unit suites, in one clang build with werror
# and without hwloc (docs/developing.md, "CI"): pointer arithmetic over the in-place sweeps'
# rings, the transport's buffers and the fibers' stacks; clang's warnings on the library and
# the tests; and a -Dhwloc=disabled build, whose placement tests show as SKIP. Multi-process
# tests stay with the release build. ORDO_CI_WIDE=0 leaves it out (a quicker local run).
if [ "${ORDO_CI_WIDE:-1}" = 1 ]; then
  if [ ! -f build-asan/build.ninja ]; then
    CC=clang CXX=clang++ meson setup build-asan --buildtype=debugoptimized -Dhwloc=disabled \
      -Db_sanitize=address,undefined -Db_lundef=false -Dwerror=true >/dev/null
  fi
  ninja -C build-asan build.ninja >/dev/null
  asan_suites=(scheduler runtime api stencil)
  asan_targets=$(suite_targets build-asan "${asan_suites[@]}" -multiprocess)
  [ -n "$asan_targets" ] || { echo "test.sh: no tests in the unit suites" >&2; exit 1; }
  # shellcheck disable=SC2086 # one word per target
  ninja -C build-asan $asan_targets
  # shellcheck disable=SC2046 # one word per option
  UCX_MEM_MMAP_HOOK_MODE=none UBSAN_OPTIONS="halt_on_error=1 print_stacktrace=1" \
    meson test -C build-asan --no-rebuild --print-errorlogs --num-processes 2 --timeout-multiplier 3 \
    $(printf -- '--suite %s ' "${asan_suites[@]}") --no-suite multiprocess
fi

# Fuzzing (docs/fuzzing.md): each target of tests/fuzz for a fixed budget (12 s, the manifest
# 4 s; two at a time) from its checked-in corpus, and fuzz_store 4 s more under a storm of
# SIGALRM. Only the fuzz targets and what they need are built there.
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang CXX=clang++ meson setup build-fuzz --buildtype=debugoptimized -Dfuzz=true \
    -Db_sanitize=address,undefined -Db_lundef=false -Dwerror=false >/dev/null
fi
ninja -C build-fuzz build.ninja >/dev/null
fuzz_targets=$(suite_targets build-fuzz fuzz)
[ -n "$fuzz_targets" ] || { echo "test.sh: no tests in the fuzz suite" >&2; exit 1; }
# shellcheck disable=SC2086 # one word per target
ninja -C build-fuzz $fuzz_targets
UCX_MEM_MMAP_HOOK_MODE=none meson test -C build-fuzz --no-rebuild --print-errorlogs \
  --num-processes 2 --suite fuzz
