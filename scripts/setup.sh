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
  # tests
  catch2
  # tests/trace: the HTML timeline rendered headless, its screenshot read back
  chromium python3-pil
  # baselines and peer runtimes for the benchmarks
  libtbb-dev libstarpu-dev libopenmpi-dev openmpi-bin
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
if [ ! -f "$top/build/build.ninja" ]; then
  meson setup "$top/build" "$top" --buildtype=release >/dev/null
fi
