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
meson compile -C build-tsan
# TSan's runtime needs a fixed memory layout; ASLR on newer kernels breaks it. UCX's mmap hooks
# (libordo links UCX) crash TSan's interceptors at thread start, so they are off here.
UCX_MEM_MMAP_HOOK_MODE=none TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
  setarch "$(uname -m)" -R meson test -C build-tsan --print-errorlogs --num-processes 2 \
  --suite tsan
