#!/usr/bin/env bash
# Runs a command and checks its exit status and output, for the app and baseline tests.
# usage: check_app.sh STATUS PATTERN... -- COMMAND [ARG...]
# Passes when COMMAND exits with STATUS and its output (stdout and stderr together) contains
# every PATTERN as a fixed string. The output is echoed so a failing test log shows it.
set -u
want=$1
shift
patterns=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  patterns+=("$1")
  shift
done
[ $# -gt 0 ] || { echo "check_app: usage: check_app.sh STATUS PATTERN... -- COMMAND..."; exit 2; }
shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -ne "$want" ]; then
  echo "check_app: exit status $rc, expected $want"
  exit 1
fi
for p in "${patterns[@]}"; do
  if ! grep -qF -- "$p" <<<"$out"; then
    echo "check_app: output lacks '$p'"
    exit 1
  fi
done
