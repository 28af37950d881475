#!/usr/bin/env bash
# Sets everything up on a fresh machine, builds, and runs the whole test suite: every suite in
# build/ (release), then the runtime, scheduler and api suites again under ThreadSanitizer in
# build-tsan/.
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
# Only what the 'tsan' suite runs is built there (its test programs and what they depend on):
# the apps, benchmarks and tools are covered by the release build above.
tsan_targets=$(python3 - build-tsan <<'PY'
import json, os, subprocess, sys
build = sys.argv[1]
def introspect(what):
    return json.loads(subprocess.check_output(["meson", "introspect", what, build]))
files = {t["id"]: t["filename"] for t in introspect("--targets")}
wanted = set()
for test in introspect("--tests"):
    if any(s.split(":")[-1] == "tsan" for s in test["suite"]):
        for dep in test.get("depends", []):
            wanted.update(os.path.relpath(f, build) for f in files.get(dep, []))
print(" ".join(sorted(wanted)))
PY
)
[ -n "$tsan_targets" ] || { echo "test.sh: no tests in the tsan suite" >&2; exit 1; }
# shellcheck disable=SC2086 # one word per target
ninja -C build-tsan $tsan_targets
# TSan's runtime needs a fixed memory layout; ASLR on newer kernels breaks it. UCX's mmap hooks
# (libordo links UCX) crash TSan's interceptors at thread start, so they are off here.
UCX_MEM_MMAP_HOOK_MODE=none TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
  setarch "$(uname -m)" -R meson test -C build-tsan --no-rebuild --print-errorlogs \
  --num-processes 2 --suite tsan
