#!/usr/bin/env bash
# Installs every Debian package that ordo's build, tests and benchmarks need, then configures
# build/ (release) when it does not exist yet. Idempotent: a second run installs nothing and
# leaves an existing build/ alone. Needs root (or sudo) for apt-get on a fresh machine.
set -euo pipefail

packages=(
  # build
  meson ninja-build pkg-config g++
  # layers: scheduler (fibers, topology), comm (transport), tools (flags, JSON, formatting)
  libboost-context-dev libhwloc-dev hwloc libucx-dev ucx-utils
  libcli11-dev nlohmann-json3-dev libfmt-dev
  # tests; the fuzz targets (clang's libFuzzer and sanitizers)
  catch2 clang libclang-rt-14-dev
  # lint: the changed lines formatted (tests/lint/format.py, git clang-format)
  clang-format
  # tests/trace: the HTML viewer in headless Chromium (driven by playwright-core from npm)
  chromium
  # baselines and peer runtimes for the benchmarks
  libtbb-dev libstarpu-dev libopenmpi-dev openmpi-bin
  # the sparse layer's METIS partitions; PETSc, the sparse benchmark's CG baseline
  libmetis-dev petsc-dev
  # comm: PMIx bootstrap (also needed for Slurm's PMIx plugin to load); multiprocess tests
  # (network namespaces, mpirun)
  libpmix-dev iproute2
  # comm: the one-node Slurm test (slurm-wlm's daemons and client, munge)
  slurmctld slurmd slurm-client munge
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

top=$(cd "$(dirname "$0")/.." && pwd)
# The trace viewer's npm packages (d3, inlined into its pages at build time; playwright-core for
# its tests), exactly as tools/ordo-trace/viewer/package-lock.json pins and hashes them. Node.js
# and npm from Debian where the machine has none. Once installed, builds need no network.
viewer=$top/tools/ordo-trace/viewer
if ! command -v npm >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing nodejs npm"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
if ! cmp -s "$viewer/package-lock.json" "$viewer/node_modules/.ordo-installed-lock.json"; then
  echo "setup: npm ci in tools/ordo-trace/viewer"
  (cd "$viewer" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
  cp "$viewer/package-lock.json" "$viewer/node_modules/.ordo-installed-lock.json"
fi

if [ ! -f "$top/build/build.ninja" ]; then
  meson setup "$top/build" "$top" --buildtype=release >/dev/null
fi
