#!/usr/bin/env bash
# Sets everything up on a fresh machine, builds, and runs the demo: heat2d checked bit for bit
# against a sequential loop.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/setup.sh"
meson compile -C "$top/build" >/dev/null
exec "$top/build/apps/heat2d/ordo-heat2d" --size 2048x2048 --blocks 4x4 --iters 100 --verify --bandwidth "$@"
